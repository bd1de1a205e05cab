"""Find a vLLM server something else started, and describe it for the state file."""

from __future__ import annotations

import contextlib
import os

import psutil

from vramtop.core.vllm import args as vllm_args
from vramtop.supervisor import launch, state, tree
from vramtop.supervisor.state import Lifecycle, ServerRecord

_MARKERS = ("vllm", "api_server", "vramtop.sim.server")
# vLLM's own default port: where attach looks when given neither a port nor a pid.
DEFAULT_PORT = 8000


def looks_like_vllm(cmdline: list[str]) -> bool:
    if vllm_args.is_vllm_command(cmdline):
        return True
    text = " ".join(cmdline[:4])
    return any(marker in text for marker in _MARKERS)


def find_server(port: int | None = None, pid: int | None = None) -> psutil.Process | str:
    """The API server process, or why none was found (a sentence for the user)."""
    if pid is None and port is None:
        port = DEFAULT_PORT
    if pid is None:
        assert port is not None
        pid = launch.listening_pid(port)
        if pid is None:
            return f"nothing of yours is listening on port {port} (or the system hides its pid)"
    try:
        proc = psutil.Process(pid)
        cmdline = proc.cmdline()
    except psutil.NoSuchProcess:
        return f"no process with pid {pid}"
    except psutil.AccessDenied:
        return f"pid {pid} belongs to another user; vramtop can only adopt your own processes"
    if not looks_like_vllm(cmdline):
        shown = " ".join(vllm_args.mask_secrets(cmdline)[:4]) or proc.name()
        return f"pid {pid} ({shown}) does not look like a vLLM server"
    # Given the EngineCore or a worker: climb to the API server that started it, and no
    # further: a shell that ran it (`bash -c "… vllm serve …"`, serve_vllm.sh) is not it.
    with contextlib.suppress(psutil.Error):
        parent = proc.parent()
        while parent is not None and is_server_process(parent.cmdline()):
            proc, parent = parent, parent.parent()
    return proc


SHELLS = {"sh", "bash", "dash", "zsh", "fish", "ksh", "tmux", "screen", "nohup", "setsid"}


def is_server_process(cmdline: list[str]) -> bool:
    if not cmdline or os.path.basename(cmdline[0]) in SHELLS:
        return False
    return looks_like_vllm(cmdline)


def record_for(profile: str, proc: psutil.Process, port: int | None) -> ServerRecord:
    cmdline = proc.cmdline()
    try:
        cwd: str | None = proc.cwd()
    except psutil.Error:
        cwd = None
    argv_port = _int(vllm_args.get_flag(cmdline, vllm_args.PORT))
    try:
        pgid: int | None = os.getpgid(proc.pid)
    except OSError:
        pgid = None
    return ServerRecord(
        profile=profile,
        state=Lifecycle.STARTING,  # until /health says it serves
        pid=proc.pid,
        pgid=pgid,
        create_time=proc.create_time(),
        tree={str(proc.pid): proc.create_time()},
        argv=vllm_args.mask_secrets(cmdline),
        cwd=cwd,
        host=vllm_args.get_flag(cmdline, vllm_args.HOST) or "127.0.0.1",
        port=port or argv_port or 8000,
        started_at=proc.create_time(),
        started_by="attached",
        budget=_float(vllm_args.get_flag(cmdline, "--gpu-memory-utilization")),
        max_model_len=_int(vllm_args.get_flag(cmdline, vllm_args.MAX_MODEL_LEN)),
        kv_cache_dtype=vllm_args.get_flag(cmdline, vllm_args.KV_CACHE_DTYPE),
    )


def output_file(pid: int) -> str | None:
    """The file a process writes its output to (its stdout, else its stderr) when that is a
    regular file: a server started as `vllm serve … > server.log 2>&1`. None for a terminal,
    a pipe, a deleted file, or a system without /proc."""
    for fd in (1, 2):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/") and os.path.isfile(target):
            return target
    return None


def rebuilt_record(profile: str, host: str | None, port: int) -> ServerRecord | str | None:
    """The record of the server vramtop launched for `profile`, rebuilt from its own process
    (the one listening on the profile's port, with vramtop's launch id and this profile's
    name in its environment) when its state file is lost. A sentence instead when the port
    is held by a server vramtop did not launch for this profile; None when nothing holds it.
    """
    if launch.port_owner(host, port) is None:
        return None
    found = find_server(port=port)
    if isinstance(found, str):
        return f"port {port} is held, but not by a vLLM server of yours: {found}"
    try:
        env = found.environ()
    except psutil.Error:
        env = {}
    launch_id, owner = env.get(tree.LAUNCH_ID_ENV), env.get(tree.PROFILE_ENV)
    if not launch_id or owner != profile:
        shown = " ".join(vllm_args.mask_secrets(found.cmdline())[:4])
        return (
            f"port {port} is held by pid {found.pid} ({shown}), which vramtop did not start "
            f"for this profile: vramtop attach adopts it"
        )
    rec = record_for(profile, found, port)
    log_file = state.log_path(profile)
    rec.started_by, rec.launch_id = "vramtop", launch_id
    rec.host = host or rec.host
    rec.log_path, rec.log_offset = str(log_file), launch.last_start_offset(log_file, profile)
    return rec


def command_of(pid: int) -> tuple[list[str], str | None, dict[str, str] | None] | None:
    """Command line, cwd and environment (where readable) of a live process."""
    try:
        proc = psutil.Process(pid)
        argv = proc.cmdline()
    except psutil.Error:
        return None
    cwd: str | None = None
    env: dict[str, str] | None = None
    with contextlib.suppress(psutil.Error):
        cwd = proc.cwd()
    with contextlib.suppress(psutil.Error):
        env = dict(proc.environ())
        env.pop(tree.LAUNCH_ID_ENV, None)
        env.pop(tree.PROFILE_ENV, None)
    return argv, cwd, env


def _int(text: str | None) -> int | None:
    try:
        return None if text is None else vllm_args.parse_token_count(text)
    except ValueError:
        return None


def _float(text: str | None) -> float | None:
    try:
        return None if text is None else float(text)
    except ValueError:
        return None
