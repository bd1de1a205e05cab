"""The console's backend, made from the command line's arguments: the one place that joins the
arguments (and the profile they name) to a machine, above the machines themselves."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from vramtop.machines.deferred_backend import BackendUnavailable, DeferredBackend
from vramtop.machines.interface import Backend

if TYPE_CHECKING:
    from vramtop.commands.common import LiveTarget


def console_backend(args: argparse.Namespace, target: LiveTarget | None = None) -> DeferredBackend:
    """The console's backend for `--demo`, `--url` or `target` (a profile's server, its
    profile read already: one that cannot be read is refused before the console opens; see
    commands/common.py's `backend_for`), built after the first frame; until then it is the
    simulated machine, a URL watched or the profile's server, with no sample yet."""

    def build() -> Backend:
        from vramtop.commands.common import backend_for
        from vramtop.commands.errors import CommandError
        from vramtop.machines.machine_backend import backend_over

        try:
            backend = backend_over(target.machine()) if target else backend_for(args)[0]
        except CommandError as exc:
            raise BackendUnavailable(str(exc)) from exc
        # Crash settling and automatic restarts on a thread of their own: a tick only reads.
        backend.keep_house()
        return backend

    demo = bool(args.demo)
    profile = target.profile if target else None
    return DeferredBackend(
        build,
        demo=demo,
        # Watching a URL: a profile serving it is found at the build.
        can_act=demo or profile is not None,
        profile_name=profile.name if profile else None,
        wsl=bool(args.wsl) if demo else None,
    )
