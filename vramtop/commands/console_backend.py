"""The console's backend, made from the command line's options: the one place that joins the
options (and the profile they name) to a machine, above the machines themselves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vramtop.machines.deferred_backend import BackendUnavailable, DeferredBackend
from vramtop.machines.interface import Backend

if TYPE_CHECKING:
    from vramtop.commands.common import LiveTarget
    from vramtop.commands.shared_options import Target


def console_backend(target: Target, live: LiveTarget | None = None) -> DeferredBackend:
    """The console's backend for `--demo`, `--url` or `live` (a profile's server, its
    profile read already: one that cannot be read is refused before the console opens; see
    commands/common.py's `backend_for`), built after the first frame; until then it is the
    simulated machine, a URL watched or the profile's server, with no sample yet."""

    def build() -> Backend:
        from vramtop.commands.common import backend_for
        from vramtop.commands.errors import CommandError
        from vramtop.machines.machine_backend import MachineBackend, backend_over

        try:
            backend = backend_over(live.machine()) if live else backend_for(target)[0]
        except CommandError as exc:
            raise BackendUnavailable(str(exc)) from exc
        if isinstance(backend, MachineBackend):
            backend.asked_by = "key"  # the console's actions are a person's keys
        # Crash settling and automatic restarts on a thread of their own: a tick only reads.
        backend.run_housekeeping()
        return backend

    demo = target.demo
    profile = live.profile if live else None
    return DeferredBackend(
        build,
        demo=demo,
        # Watching a URL: a profile serving it is found at the build.
        can_act=demo or profile is not None,
        profile_name=profile.name if profile else None,
        wsl=target.wsl if demo else None,
    )
