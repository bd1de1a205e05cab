"""The real machine's parts: its GPU probe (see sources/probes.py), the profile's supervisor
when there is a profile, and the sampler over them.

Apart from the backend (machine_backend.py, which adds the session and its diagnosis) so that
a one-shot answer can take its first reading before the rest is loaded: its rate window then
runs while the rest loads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vramtop.machines.sampler import Sampler
from vramtop.sources.door_reading import DoorReader

if TYPE_CHECKING:
    # pydantic comes with a profile: watching a URL reads none before its first frame.
    from vramtop.config import Profile

    # Imported where a profile needs one: watching a URL (`--once --url`) never acts, and
    # the supervisor brings httpx and psutil.
    from vramtop.supervisor.service import Supervisor

DEFAULT_URL = "http://127.0.0.1:8000"


@dataclass(frozen=True)
class LiveMachine:
    sampler: Sampler
    supervisor: Supervisor | None
    wsl: bool


def api_key_from(profile: Profile | None, env_var: str | None) -> str | None:
    name = env_var or (profile.api_key_env if profile else None)
    return os.environ.get(name) if name else None


def door_reader(supervisor: Supervisor | None) -> DoorReader | None:
    """The profile's front door as a source (its own report, read each tick), or None where
    the profile has none."""
    address = supervisor.profile.front_door if supervisor is not None else None
    if supervisor is None or address is None:
        return None
    return DoorReader(supervisor.agent_url, address)


def live_machine(
    profile: Profile | None,
    url: str | None,
    api_key_env: str | None,
    windows: bool = True,
    gpu_probe: str = "auto",
) -> LiveMachine:
    """The real machine: its GPU probe, and the profile's server (or just a URL to watch).

    With a `url` the profile's supervisor comes only when what listens there is the profile's
    own server, or nothing is (then the profile's state is the truth, and it can start)."""
    from vramtop.sources.host import is_wsl
    from vramtop.sources.probes import DeferredProbe

    wsl = is_wsl()
    probe = DeferredProbe(gpu_probe)
    supervisor = None
    if profile is not None:
        from vramtop.machines import profile_options
        from vramtop.supervisor.service import Supervisor
        from vramtop.supervisor.stopping import memory_released_on

        supervisor = Supervisor(
            profile, memory_released=memory_released_on(probe), options_of=profile_options
        )
        if url is not None and not supervisor.owns_its_port():
            # `--url` on the profile's port, held by a server the profile did not start (one
            # started by hand): that server is shown, not the profile's record of another.
            supervisor = None
    windows_source = None
    if wsl and windows:
        # Under WSL2 NVML has no per-process numbers: Windows' own counters name the desktop
        # programs and show whether vLLM's memory spilled into system memory.
        from vramtop.sources.windows_counters import WindowsGpuSource

        windows_source = WindowsGpuSource()
    # Behind a front door, vLLM itself on its loopback port: vramtop's reads are never held at
    # the door nor counted among the agent's requests.
    read_at = supervisor.scrape_url if supervisor else profile.url if profile else DEFAULT_URL
    sampler = Sampler(
        probe=probe,
        url=url or read_at,
        api_key=api_key_from(profile, api_key_env),
        info=supervisor.status if supervisor else (lambda: None),
        log_path=(lambda: supervisor.log_path) if supervisor else (lambda: None),
        log_start=(lambda: supervisor.log_offset) if supervisor else (lambda: 0),
        windows=windows_source,
        door=door_reader(supervisor),
    )
    return LiveMachine(sampler, supervisor, wsl)
