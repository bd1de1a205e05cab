"""The machine-side wiring: what the console and the commands run against (the real
machine, the simulated one, a recording), the per-tick sampler, and the setup checks."""
