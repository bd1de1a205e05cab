"""What the monitoring commands (the console, `--once`, `record`, `export`) share: the machine
their options' `Target` names, and opening a session file."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from vramtop.commands.errors import CommandError
from vramtop.commands.shared_options import Target

if TYPE_CHECKING:
    # Imported where they are used: a one-shot answer takes its first reading before the
    # backend (its session, its diagnosis) is loaded.
    from vramtop.config import Profile
    from vramtop.core.json_types import JsonObject
    from vramtop.core.model import Sample
    from vramtop.machines.live_machine import LiveMachine
    from vramtop.machines.machine_backend import MachineBackend
    from vramtop.session.writer import SessionWriter


def query_time() -> str:
    """When an answer was read, as gpustat names it: local time with its offset
    (`--once --json` and `status --json` stamp their answers with it)."""
    return datetime.now().astimezone().isoformat(timespec="milliseconds")


def _normal_rate_field(backend: MachineBackend) -> JsonObject:
    """The header's optional `normal_rate`: what the recording's rates are compared with."""
    normal = backend.session.normal_rate()
    extra: JsonObject = {"demo": backend.demo}
    if normal is not None:
        extra["normal_rate"] = normal.to_json()
    return extra


@dataclass(frozen=True)
class LiveTarget:
    """The real machine's server the arguments name: a profile's, or a URL watched."""

    profile: Profile | None
    url: str | None
    api_key_env: str | None
    windows: bool
    gpu_probe: str

    def machine(self) -> LiveMachine:
        """Its parts: the GPU probe, the profile's supervisor, the sampler."""
        from vramtop.machines.live_machine import live_machine

        return live_machine(
            self.profile,
            self.url,
            self.api_key_env,
            windows=self.windows,
            gpu_probe=self.gpu_probe,
        )


CARD_WITHOUT_DEMO = "--card picks a simulated machine: use it with --demo."
WSL_WITHOUT_DEMO = "--wsl only applies to the simulated machine: use it with --demo."
FRONT_DOOR_WITHOUT_DEMO = (
    "--front-door goes with --demo: a profile's door is its front_door field "
    "(vramtop import launch.sh --front-door ADDR)"
)


def demo_card(target: Target) -> str:
    """The simulated machine `target` names (with `--demo`): `--card`; else the card of the
    demo profile `--profile` names (`demo-spark`: spark); with `--wsl` the 5090; else the
    card whose server runs, where only one runs (said on stderr); else the default card.
    Resolve it once per command (pass `replace(target, card=...)` on). CommandError where
    `--profile` names no demo profile or another card than `--card`, or where servers run
    on two cards and neither option says which."""
    from vramtop.machines import demo_world
    from vramtop.sim.card import CARDS, DEFAULT_CARD

    card = target.card
    if target.profile is not None:
        named = demo_world.card_of_profile(target.profile)
        names = ", ".join(demo_world.demo_profile_name(c) for c in CARDS)
        if named is None:
            raise CommandError(
                f"--profile {target.profile}: with --demo the profiles are the simulated "
                f"machines' ({names}); --card picks one"
            )
        if card is not None and card != named:
            raise CommandError(
                f"--profile {target.profile} is the {named} demo, --card {card} another: "
                "give one of them"
            )
        card = named
    if card is not None:
        return card
    if target.wsl:
        return DEFAULT_CARD  # the WSL2 way is the 5090's (the others run Linux)
    running = demo_world.running_cards()
    if len(running) > 1:
        raise CommandError(
            f"simulated servers run on {' and '.join(running)}: say which with "
            + " or ".join(f"--card {c}" for c in running)
        )
    if not running:
        return DEFAULT_CARD
    if running[0] != DEFAULT_CARD:
        # Found, not named: said, as the command's own words may not name the machine.
        print(
            f"vramtop: acting on the simulated {running[0]} machine, the one whose server "
            f"runs (--card {DEFAULT_CARD} names the default one)",
            file=sys.stderr,
        )
    return running[0]


def backend_for(
    target: Target, *, clock: Callable[[], float] | None = None
) -> tuple[MachineBackend, bool]:
    """The backend `target` names, and whether this command started the simulated machine
    itself (then it stops it again when done). `clock`: the simulated machine's samples'
    clock (see `demo_backend`)."""
    if target.demo:
        from vramtop.machines.demo_world import begin_demo_world, demo_door

        wsl, card = target.wsl, demo_card(target)
        try:
            # The simulated GPU's daemon starts while the backend's modules load.
            begun = begin_demo_world(wsl, card)
            if begun.unlike_asked is not None:
                print(f"vramtop: {begun.unlike_asked}", file=sys.stderr)
            from vramtop.machines.demo_backend import demo_backend

            return demo_backend(
                wsl=wsl,
                windows=target.windows,
                card=card,
                begun=begun,
                front_door=demo_door(target.front_door, card),
                clock=clock,
            )
        except RuntimeError as exc:
            raise CommandError(f"the simulated machine could not start: {exc}") from exc
    from vramtop.machines.machine_backend import backend_over

    return backend_over(live_target(target).machine()), False


def live_target(target: Target) -> LiveTarget:
    """The server of the real machine `target` names (not `--demo`). CommandError when the
    options or a profile they name cannot be used."""
    if target.card:
        raise CommandError(CARD_WITHOUT_DEMO)
    if target.wsl:
        raise CommandError(WSL_WITHOUT_DEMO)
    if target.front_door is not None:
        raise CommandError(FRONT_DOOR_WITHOUT_DEMO)
    from vramtop.profiles import load_default_profile, load_profile
    from vramtop.settings import ConfigError, load_settings

    url = target.url
    try:
        profile = load_profile(target.profile) if target.profile else None
        if profile is None and not url:
            profile = load_default_profile()
        gpu_probe = load_settings().gpu_probe
    except ConfigError as exc:
        raise CommandError(str(exc)) from exc
    if profile is None and url:
        # A URL that is a profile's own server: its state, pid and profile are known too.
        profile = profile_serving(url)
    key_env = target.api_key_env
    if key_env and key_env not in os.environ:
        # Named on the command line and not set: reading without a key would read as the
        # server refusing vramtop (401), not as the typo or the missing export it is.
        raise CommandError(
            f"--api-key-env {key_env}: no variable {key_env} is set in this shell; export it "
            "(export NAME=…) or leave the option out"
        )
    return LiveTarget(
        profile=profile,
        url=url,
        api_key_env=key_env,
        windows=target.windows,
        gpu_probe=gpu_probe,
    )


LOOPBACK = {"127.0.0.1", "localhost", "::1", "0.0.0.0", ""}


def same_server(a: str, b: str) -> bool:
    """Whether two URLs reach the same server (loopback names are one host)."""
    first, second = urlsplit(a), urlsplit(b)
    try:
        ports = (first.port or 80, second.port or 80)
    except ValueError:
        return False
    hosts = [(u.hostname or "").lower() for u in (first, second)]
    same_host = hosts[0] == hosts[1] or (hosts[0] in LOOPBACK and hosts[1] in LOOPBACK)
    return same_host and ports[0] == ports[1]


def profile_serving(url: str) -> Profile | None:
    """The profile whose server `url` is (the default one first), if any. A profile that
    cannot be read is passed over: watching a URL does not need it."""
    from vramtop.profiles import list_profiles, load_profile
    from vramtop.settings import ConfigError, load_settings

    try:
        default = load_settings().default_profile
    except ConfigError:
        default = None
    for name in sorted(list_profiles(), key=lambda n: n != default):
        try:
            profile = load_profile(name)
        except ConfigError:
            continue
        if same_server(profile.url, url):
            return profile
    return None


def open_session_file(
    path: Path, backend: MachineBackend, first: Sample, *, replace: bool = False
) -> SessionWriter:
    """A session file whose header describes `backend` as `first` saw it. OSError if the
    file cannot be written (`FileExistsError` if it exists and not `replace`)."""
    from vramtop.session.writer import SessionWriter, make_header

    header = make_header(
        started_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        gpus=first.gpu.devices,
        info=first.info,
        wsl=backend.wsl,
        extra=_normal_rate_field(backend),
    )
    return SessionWriter(path, header, replace=replace)
