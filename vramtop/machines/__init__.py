"""The machine-side wiring: what the console and the commands run against (the real
machine, the simulated one, a recording), the per-tick sampler, and the setup checks."""


def profile_options(profile: str) -> str:
    """How a command line names the server of `profile` (`demo_world.profile_options`: a
    demo machine's in the demo's own words, `--demo --card spark`), for a supervisor of a
    person's profile: the demo's module is read only when a port is found held."""
    from vramtop.machines.demo_world import profile_options as named

    return named(profile)
