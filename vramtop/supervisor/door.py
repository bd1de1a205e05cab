"""The front door as the supervisor sees it: its process, its token, and its control routes.

The door (`python -m vramtop.frontdoor`) is a process of its own, in a session of its own,
so that it outlives the console as vLLM does; the record names it (`door_pid` and its create
time) and a later vramtop finds it there. The supervisor asks it, under the reserved prefix
`/vramtop/door` on the door's own listener, to hold new requests before a restart (letting
those in flight finish), to release them to the new server once it serves, or to fail them
when it never does. Every call here answers or says why not; none raises for the outside
world (a door that does not answer is the caller's to restart).

The token the POSTs carry is in a 0600 file in the state directory, read by the door at its
start; it is never logged, and never in an argv.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets as token_maker
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx
import psutil

from vramtop import files, locations, ports
from vramtop.config import Profile, parse_door_address
from vramtop.core import secrets
from vramtop.core.json_types import JsonObject, JsonValue
from vramtop.core.module_run import module_run
from vramtop.frontdoor.protocol import PREFIX as CONTROL
from vramtop.frontdoor.protocol import TOKEN_HEADER
from vramtop.supervisor import launch, tree
from vramtop.supervisor.readiness import client_for
from vramtop.supervisor.state import ServerRecord

log = logging.getLogger(__name__)

MODULE = "vramtop.frontdoor"
# A door's start: Python, aiohttp and the listener (well under a second here; a slow disk's
# first import takes longer).
START_TIMEOUT_S = 20.0
# The door's own SIGTERM lets requests in flight finish for up to 10 s.
STOP_TIMEOUT_S = 12.0
_POLL_S = 0.05
LOOPBACK = ports.LOOPBACK


def token_path(profile: str) -> Path:
    return locations.state_dir() / f"door-{locations.profile_file_name(profile)}.token"


def log_path(profile: str) -> Path:
    return locations.log_dir() / f"door-{locations.profile_file_name(profile)}.log"


def _port_path(profile: str) -> Path:
    return locations.state_dir() / f"door-{locations.profile_file_name(profile)}.port"


def door_url(address: str) -> str:
    """The base URL the door answers on (one listening everywhere is reached on loopback)."""
    host, port = parse_door_address(address)
    if host in ("0.0.0.0", "::", ""):
        host = LOOPBACK
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def upstream_url(port: int) -> str:
    return f"http://{LOOPBACK}:{port}"


def kept_internal_port(profile: str) -> int:
    """The loopback port vLLM listens on behind the profile's door: chosen free once, then
    kept (a restart reuses it, and a console opened before the server starts scrapes it)."""
    path = _port_path(profile)
    try:
        port = int(locations.read_own(path, limit=64).strip())
    except files.NotYours:
        raise
    except (OSError, ValueError):
        port = 0  # not chosen yet, or damaged: chosen again
    return port if 0 < port < 65536 else _new_internal_port(profile)


def internal_port_for_launch(profile: str, door_port: int | None = None) -> int:
    """The kept internal port, or a new one (kept from now on) when something else holds it
    now (vramtop's own server behind it is stopped before a launch)."""
    port = kept_internal_port(profile)
    if port == door_port or launch.port_owner(LOOPBACK, port) is not None:
        port = _new_internal_port(profile, avoid=door_port)
    return port


def _new_internal_port(profile: str, avoid: int | None = None) -> int:
    # Below the ephemeral range: vLLM binds it only after its imports, and a port from that
    # range can meanwhile be taken by any outgoing connection on the machine.
    port = ports.free_port(avoid=() if avoid is None else (avoid,))
    files.write_atomic(_port_path(profile), f"{port}\n".encode())
    return port


def token(profile: str) -> str:
    """The door's control token, for a door about to start: the one its file holds, or a
    new one written 0600."""
    held = current_token(profile)
    if held is not None:
        return held
    made = token_maker.token_urlsafe(32)
    files.write_atomic(path=token_path(profile), data=f"{made}\n".encode())
    return made


def current_token(profile: str) -> str | None:
    """The token a running door was started with (its file, never through a link); None
    where it cannot be read, `files.NotYours` where another user owns or can write it or
    the directories above it (`locations.read_own`). Never a new one: a door keeps the
    token it read at its start, and a new file would lock its supervisor out of it."""
    try:
        text = locations.read_own(token_path(profile), limit=4096).decode().strip()
    except files.NotYours:
        raise  # another user's, or one they could write: not a token to send
    except (OSError, UnicodeDecodeError):
        return None
    return text if len(text) >= 16 else None


def alive(rec: ServerRecord) -> bool:
    """Whether the record's door process still runs (one read of its /proc entry)."""
    return rec.door_pid is not None and tree.process_alive(rec.door_pid, rec.door_create_time)


def _door_env(profile_env: Mapping[str, str]) -> dict[str, str]:
    """The door's environment: vramtop's and the profile's, without any secret (the door
    passes the client's key through; it needs none of its own)."""
    env = {**os.environ, **profile_env}
    return {k: v for k, v in env.items() if not secrets.is_secret_name(k)}


def spawn(
    profile: str,
    address: str,
    upstream_port: int | None,
    hold_s: float,
    profile_env: Mapping[str, str] | None = None,
) -> tuple[int, float | None] | str:
    """Start the door detached and wait until it answers; its pid and create time, or why
    it did not start (its own last words from its log). Without `upstream_port` (the server
    behind it does not serve yet) it holds from its first request until a release names
    the server: started forwarding and told to hold once it answered, the agent's requests
    in between went to a server still loading and failed."""
    token(profile)  # the file exists before the door reads it
    logfile = log_path(profile)
    launch.rotate_log(logfile)
    offset = launch.write_marker(logfile, f"front door {profile}: {address}")
    command = [
        sys.executable,
        "-m",
        MODULE,
        "--listen",
        address,
        *(("--upstream", upstream_url(upstream_port)) if upstream_port is not None else ()),
        "--hold-s",
        f"{hold_s:g}",
        "--token-file",
        str(token_path(profile)),
    ]
    try:
        child = launch.spawn(command, _door_env(profile_env or {}), None, logfile)
    except OSError as exc:
        return f"the front door could not be started: {exc}"
    made = None  # (our child, not yet waited for: its pid cannot be reused meanwhile)
    try:
        made = _create_time(child.pid)
        deadline = time.monotonic() + START_TIMEOUT_S
        url = door_url(address)
        with client_for(url, 1.0, trust_env=False) as client:
            while time.monotonic() < deadline:
                if child.poll() is not None:
                    last = _tail(logfile, offset)
                    return f"the front door on {address} exited at its start{last}"
                with contextlib.suppress(httpx.HTTPError, ValueError, RecursionError):
                    info = client.get(url + CONTROL).json()
                    if isinstance(info, dict) and info.get("pid") == child.pid:
                        log.info("front door of %s on %s: pid %d", profile, address, child.pid)
                        return child.pid, made
                time.sleep(_POLL_S)
    except BaseException:
        # Ctrl+C while it starts: no record names it yet, and it would hold its port (and
        # the requests it is sent) for nobody. (Interrupted inside the spawn itself, or
        # killed, it is left: the profile's next `stop` or start ends it, `DoorProcess.end_strays`.)
        _end(child.pid, made)
        raise
    _end(child.pid, made)
    return f"the front door on {address} did not answer within {START_TIMEOUT_S:.0f} s"


def _tail(path: Path, offset: int) -> str:
    with contextlib.suppress(OSError):
        with open(path, "rb") as f:
            f.seek(offset)
            lines = [ln for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
        if lines:
            return ": " + secrets.mask_line(lines[-1])
    return ""


def _create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def stop(rec: ServerRecord) -> None:
    """End the record's door (SIGTERM: it lets requests in flight finish; SIGKILL after
    `STOP_TIMEOUT_S`). Nothing when it is gone already."""
    if alive(rec) and rec.door_pid is not None and is_door_of(rec.door_pid, rec.profile):
        _end(rec.door_pid, rec.door_create_time)


def is_door_of(pid: int, profile: str) -> bool:
    """Whether the process is the profile's front door, as its own command line says (the
    door's module, reading this profile's token file): a state file naming another process
    never makes a stop signal it."""
    try:
        argv = psutil.Process(pid).cmdline()
    except psutil.Error:
        return False
    return is_door_argv(argv, profile)


def is_door_argv(argv: Sequence[str], profile: str) -> bool:
    """Whether a command line is the profile's front door: the door's module, reading this
    profile's token file."""
    return is_door_command(argv) and str(token_path(profile)) in argv


def strays(profile: str, named: int | None) -> list[psutil.Process]:
    """This user's front doors of `profile` that no record names (`named`: the record's door
    pid, or None): a door whose start was interrupted or killed before the record named it.
    Under the profile's lock no other vramtop starts one, so each holds its port, and any
    request sent to it, for nobody. Another user's process is never one."""
    uid = os.getuid()
    found = []
    for proc in psutil.process_iter(["uids", "cmdline"]):
        uids, argv = proc.info["uids"], proc.info["cmdline"] or []
        if proc.pid == named or uids is None or uids.real != uid:
            continue
        if is_door_argv(argv, profile):
            found.append(proc)
    return found


def is_door_command(argv: Sequence[str]) -> bool:
    """Whether a process's command line is a front door's: a Python interpreter running the
    door's module, with whatever interpreter options (`python -X utf8 -m vramtop.frontdoor`,
    `/usr/bin/python3 -Im vramtop.frontdoor`). A shell that starts one (`sh -c "python -m
    vramtop.frontdoor …"`) is not the door."""
    run = module_run(argv)
    return run is not None and run.module == MODULE


def _end(pid: int, made: float | None) -> None:
    with contextlib.suppress(psutil.Error):
        proc = psutil.Process(pid)
        if made is not None and not tree.same_start(proc.create_time(), made):
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except psutil.TimeoutExpired:
            proc.kill()
            proc.wait(5.0)


def info(rec: ServerRecord, timeout_s: float = 1.0) -> JsonObject | None:
    """The door's own report (`GET /vramtop/door`), or None when it does not answer."""
    if rec.front_door is None:
        return None
    url = door_url(rec.front_door)
    try:
        data = _looking(url).get(url + CONTROL, timeout=timeout_s).json()
    except (httpx.HTTPError, ValueError, RecursionError):  # (not the door: another's answer)
        return None
    return data if isinstance(data, dict) else None


# The door's report is asked every few seconds, for as long as the console or the guard runs
# (their housekeeping looks for a hold left behind): one client for each thread that asks,
# its connection kept between the looks, not a new client and connection each time.
_LOOKS = threading.local()
LOOK_KEEPALIVE_S = 30.0  # longer than the housekeeping's 5 s between looks


def _looking(url: str) -> httpx.Client:
    client: httpx.Client | None = getattr(_LOOKS, "client", None)
    if client is None:
        client = _LOOKS.client = client_for(url, 1.0, trust_env=False, keepalive_s=LOOK_KEEPALIVE_S)
    return client


def _post(rec: ServerRecord, route: str, body: JsonObject, timeout_s: float) -> JsonValue:
    """One control POST; its JSON answer, or None (logged) when the door did not answer."""
    if rec.front_door is None:
        return None
    url = f"{door_url(rec.front_door)}{CONTROL}/{route}"
    try:
        known = current_token(rec.profile)
    except files.NotYours as exc:  # asked of nobody: the call's outcome says what failed
        log.warning("front door of %s: %s: %s", rec.profile, route, exc.strerror)
        return None
    if known is None:
        log.warning("front door of %s: %s: its token file cannot be read", rec.profile, route)
        return None
    headers = {TOKEN_HEADER: known}
    try:
        with client_for(url, timeout_s, trust_env=False) as client:
            resp = client.post(url, json=body, headers=headers)
            resp.raise_for_status()
            answer: JsonValue = resp.json()
            return answer
    except (httpx.HTTPError, ValueError, RecursionError) as exc:
        log.warning("front door of %s: %s failed: %s", rec.profile, route, exc)
        return None


def hold(rec: ServerRecord, drain_s: float) -> JsonObject | None:
    """New requests held from now on; returns once those in flight have finished or
    `drain_s` has passed: `{"drained": bool, "in_flight": int}` (None: no answer)."""
    answer = _post(rec, "hold", {"drain_s": drain_s}, timeout_s=drain_s + 10.0)
    return answer if isinstance(answer, dict) else None


def release(rec: ServerRecord) -> int | None:
    """Held requests (and new ones) forwarded to the record's server; how many were held."""
    if rec.internal_port is None:
        return None
    answer = _post(rec, "release", {"upstream": upstream_url(rec.internal_port)}, 10.0)
    released = answer.get("released") if isinstance(answer, dict) else None
    return released if isinstance(released, int) else None


def fail(rec: ServerRecord, reason: str) -> bool:
    """Every held request answered 503 at once; holding ends."""
    return _post(rec, "fail", {"reason": secrets.mask_line(reason)}, 10.0) is not None


def vllm_address(profile: Profile) -> tuple[str | None, int]:
    """Where the profile's vLLM listens: behind a front door, the kept loopback port; else
    the profile's own host and port."""
    if profile.front_door is None:
        return profile.host, profile.port
    return LOOPBACK, kept_internal_port(profile.name)


def adopt(rec: ServerRecord, profile: Profile) -> None:
    """A record rebuilt from the running server (its state file lost): the profile's door
    found again where it listens, named in it."""
    if profile.front_door is None:
        return
    pid = launch.listening_pid(parse_door_address(profile.front_door)[1])
    if pid is not None:
        adopt_door(rec, profile.front_door, pid)


def adopt_door(rec: ServerRecord, address: str, pid: int) -> bool:
    """`rec` names the door `pid`, listening on `address`, as its own, in front of its server
    (its restarts hold the door's requests); False, `rec` unchanged, where `pid` is not a
    door's process (any longer)."""
    try:
        proc = psutil.Process(pid)
        if not is_door_command(proc.cmdline()):
            return False
        made = proc.create_time()
    except psutil.Error:
        return False
    rec.front_door, rec.door_pid, rec.door_create_time = address, pid, made
    rec.internal_port = rec.port
    return True


DOOR_FIELDS = ("front_door", "door_pid", "door_create_time", "door_restarts", "internal_port")


def keep_door_fields(rec: ServerRecord, current: ServerRecord) -> None:
    """`rec` (a copy read earlier, about to be saved) takes the door's fields from the record
    as it is now: housekeeping may have started the door again meanwhile."""
    for name in ("door_pid", "door_create_time", "door_restarts"):
        setattr(rec, name, getattr(current, name))
