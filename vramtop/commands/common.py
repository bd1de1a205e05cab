"""What the monitoring commands (the console, `--once`, `record`) share: choosing the machine
from the arguments, and opening a session file."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vramtop.backends import MachineBackend
from vramtop.core.model import Sample
from vramtop.session.writer import SessionWriter, make_header


def _normal_rate_field(backend: MachineBackend) -> dict[str, Any]:
    """The header's optional `normal_rate`: what the recording's rates are compared with."""
    normal = backend.normal_rate()
    extra: dict[str, Any] = {"demo": backend.demo}
    if normal is not None:
        extra["normal_rate"] = normal.to_json()
    return extra


class UsageError(Exception):
    """Arguments that cannot be used, with the message to show."""


def backend_for(args: argparse.Namespace) -> tuple[MachineBackend, bool]:
    """The backend the arguments ask for, and whether this command started the simulated
    machine itself (then it stops it again when done)."""
    windows = not getattr(args, "no_windows", False)
    if getattr(args, "demo", False):
        from vramtop.demo import demo_backend
        from vramtop.sim.card import DEFAULT_CARD

        try:
            return demo_backend(
                wsl=bool(getattr(args, "wsl", False)),
                windows=windows,
                card=getattr(args, "card", None) or DEFAULT_CARD,
            )
        except RuntimeError as exc:
            raise UsageError(f"the simulated machine could not start: {exc}") from exc
    if getattr(args, "card", None):
        raise UsageError("--card picks a simulated machine: use it with --demo.")
    from vramtop.backends import live_backend
    from vramtop.config import ConfigError, load_settings
    from vramtop.profiles import load_default_profile, load_profile

    profile_name = getattr(args, "profile", None)
    url = getattr(args, "url", None)
    try:
        profile = load_profile(profile_name) if profile_name else None
        if profile is None and not url:
            profile = load_default_profile()
        gpu_probe = load_settings().gpu_probe
    except ConfigError as exc:
        raise UsageError(str(exc)) from exc
    api_key_env = getattr(args, "api_key_env", None)
    return live_backend(profile, url, api_key_env, windows=windows, gpu_probe=gpu_probe), False


def open_session_file(
    path: Path, backend: MachineBackend, first: Sample, *, replace: bool = False
) -> SessionWriter:
    """A session file whose header describes `backend` as `first` saw it. OSError if the
    file cannot be written (`FileExistsError` if it exists and not `replace`)."""
    header = make_header(
        started_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        gpus=first.gpu.devices,
        info=first.info,
        wsl=backend.wsl,
        extra=_normal_rate_field(backend),
    )
    return SessionWriter(path, header, replace=replace)
