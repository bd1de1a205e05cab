"""Launch a server: its own session, its output appended to a log file, no shell string built.

The user's prelude (e.g. `source …/conda.sh && conda activate vllm`) is their own shell text
and runs as-is; the server's argv is passed to bash as positional arguments and started with
`exec "$@"`, so no profile value is ever parsed by a shell.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from vramtop import files
from vramtop.core import secrets
from vramtop.core.names import is_profile_name
from vramtop.core.shell_words import shell_line
from vramtop.core.vllm import args as vllm_args
from vramtop.programs import TimedOut, run_program
from vramtop.supervisor import tree

if TYPE_CHECKING:
    from vramtop.config import Profile

log = logging.getLogger(__name__)

LOG_ROTATE_BYTES = 64 * 1024 * 1024
LOG_KEEP = 3


# The variable the prelude's text travels in: never in bash's argv, where `ps` shows it to
# every user for as long as the prelude runs (a `conda activate` takes seconds), and a key the
# person wrote into their prelude with it.
PRELUDE_ENV = "VRAMTOP_PRELUDE"
_RUN_PRELUDE = f'eval "${PRELUDE_ENV}"\nunset {PRELUDE_ENV}\n'


def build_command(argv: Sequence[str], prelude: str | None) -> list[str]:
    """The server's command: its argv, after the prelude when there is one. The prelude's
    text is not in it: it comes from the environment `prelude_env` gives."""
    if not prelude or not prelude.strip():
        return list(argv)
    return ["bash", "-c", _RUN_PRELUDE + 'exec "$@"', "vllm-launch", *argv]


def prelude_env(prelude: str | None) -> dict[str, str]:
    """The environment `build_command`'s bash reads the prelude from (unset before the
    server starts)."""
    if not prelude or not prelude.strip():
        return {}
    return {PRELUDE_ENV: prelude.strip()}


# How long `launch_problem` lets a profile's prelude run (a conda activate takes seconds).
PRELUDE_CHECK_TIMEOUT_S = 30.0


def launch_problem(
    profile: Profile, prelude_timeout_s: float = PRELUDE_CHECK_TIMEOUT_S
) -> str | None:
    """Why the profile's launch command cannot run here (its program is not found, or not
    executable), in words; None when it can, or when that cannot be known in time.

    The program is looked for as the launch would: on the PATH of the profile's environment,
    or, with a prelude, on the PATH that prelude leaves (it is run, as a start runs it, with
    `command -v` in place of the server; a prelude still running after `prelude_timeout_s`
    is ended with all it started)."""
    if not profile.argv:
        return "the profile has no command to launch"
    program = profile.argv[0]
    env = build_env(profile.env, {})
    if profile.prelude and profile.prelude.strip():
        script = _RUN_PRELUDE + 'command -v -- "$1" >/dev/null'
        try:
            done = run_program(
                ["bash", "-c", script, "vllm-check", program],
                env={**env, **prelude_env(profile.prelude)},
                cwd=profile.cwd or None,
                timeout_s=prelude_timeout_s,
            )
        except (OSError, TimedOut) as exc:
            log.info("could not check the launch command: %s", exc)
            return None
        if done.returncode == 0:
            return None
        return f"{program!r} is not found after the profile's prelude: the server cannot start"
    if os.sep in program:
        path = Path(profile.cwd or ".") / program
        if not path.is_file():
            return f"{program!r} does not exist: the server cannot start"
        if not os.access(path, os.X_OK):
            return f"{program!r} is not executable: the server cannot start"
        return None
    if shutil.which(program, path=env.get("PATH")) is None:
        return f"{program!r} is not on PATH here: the server cannot start"
    return None


def build_env(
    profile_env: Mapping[str, str] | None,
    extra: Mapping[str, str],
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """os.environ + the profile's variables + `extra` (the launch id, the handed secrets).
    A key travels only in the environment: vramtop never copies it into a file or an argv."""
    env = dict(os.environ if base is None else base)
    env.update(profile_env or {})
    env.update(extra)
    return env


class MissingSecret(Exception):
    """The profile names a variable for the API key that is not set: starting would serve
    without a key. `args`: the message and what to do."""


def handed_secrets(
    api_key_env: str | None, hf_token_env: str | None, environ: Mapping[str, str]
) -> dict[str, str]:
    """The secrets the server gets in its environment, under the names vLLM reads: the API
    key as VLLM_API_KEY and the Hugging Face token as HF_TOKEN, whatever variable the profile
    keeps them in. Never in argv, where `ps` shows them.

    Raises `MissingSecret` when the API key's variable is unset or empty; a missing token is
    left to the server (public models need none)."""
    out: dict[str, str] = {}
    if api_key_env:
        key = environ.get(api_key_env)
        if not key:
            raise MissingSecret(
                f"the profile takes the API key from ${api_key_env}, which is not set here; "
                "nothing was started (it would have served without a key)",
                f"export {api_key_env}=… in the shell that runs vramtop; the server gets it "
                f"as {secrets.VLLM_API_KEY}",
            )
        out[secrets.VLLM_API_KEY] = key
    if hf_token_env and environ.get(hf_token_env):
        out[secrets.HF_TOKEN] = environ[hf_token_env]
    return out


def rotate_log(path: Path, max_bytes: int = LOG_ROTATE_BYTES, keep: int = LOG_KEEP) -> None:
    """Only called when no server writes to `path`: rename log -> log.1 -> log.2 …"""
    try:
        if path.stat().st_size <= max_bytes:
            return
    except FileNotFoundError:
        return
    for i in range(keep - 1, 0, -1):
        older = path.with_name(f"{path.name}.{i}")
        if older.exists():
            os.replace(older, path.with_name(f"{path.name}.{i + 1}"))
    os.replace(path, path.with_name(f"{path.name}.1"))


def open_log(path: Path) -> int:
    """Append-only descriptor for the server's stdout and stderr, user-only."""
    return files.open_append(path)


def write_marker(path: Path, text: str) -> int:
    """Append vramtop's own line (already masked); returns the file size after it."""
    fd = open_log(path)
    try:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        os.write(fd, f"=== vramtop: {text} at {stamp} ===\n".encode())
        return os.fstat(fd).st_size
    except OSError as exc:  # a full disk, a quota: said with the file it could not write
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    finally:
        os.close(fd)


def write_start_marker(path: Path, profile: str, argv: Sequence[str]) -> int:
    """vramtop's start line for `profile`, its command (already masked) on that one line
    (shell-quoted: an argument of several lines, an inline chat template, is written `$'…\\n…'`
    and never passes for the server's own lines after it); returns the file size after it."""
    return write_marker(path, f"start {profile}: {shell_line(argv)}")


# How far back `last_start_offset` looks for vramtop's start line.
_MARKER_WINDOW = 4 * 1024 * 1024


def last_start_offset(path: Path, profile: str) -> int:
    """Where the newest run vramtop started for `profile` begins in its log (just after its
    start line, as `write_marker` returned it); 0 when no such line is in the log's last
    4 MB (then the whole file's tail is read)."""
    marker = f"=== vramtop: start {profile}: ".encode()
    try:
        with open(path, "rb") as log_file:
            size = log_file.seek(0, os.SEEK_END)
            begin = max(0, size - _MARKER_WINDOW)
            log_file.seek(begin)
            text = log_file.read()
    except OSError:
        return 0
    at = text.rfind(marker)
    if at < 0:
        return 0
    end = text.find(b"\n", at)
    return begin + (end + 1 if end >= 0 else len(text))


def spawn(
    command: Sequence[str], env: Mapping[str, str], cwd: str | None, log_file: Path
) -> subprocess.Popen[bytes]:
    """Start `command` in a new session (its own process group), output to `log_file`."""
    fd = open_log(log_file)
    try:
        return subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            env=dict(env),
            cwd=cwd or None,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(fd)


ProfileOptions = Callable[[str], str]
"""How a command line names a profile's server (the demo's own words are the machines')."""


def profile_option(name: str) -> str:
    return f"--profile {name}"


def port_owner(
    host: str | None, port: int, options_of: ProfileOptions = profile_option
) -> str | None:
    """Who holds `port` already, in words; None when it is free. `options_of`: how a
    command line names the server of the profile that holds it (a demo's: `--demo --card
    spark`), said in the command that ends it."""
    bind_host = host if host and host not in ("localhost",) else "127.0.0.1"
    if bind_host in ("0.0.0.0", "::"):
        bind_host = "0.0.0.0"
    family = socket.AF_INET6 if ":" in bind_host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # Same option servers use: a port in TIME_WAIT after our own stop is free to reuse.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((bind_host, port))
            return None
        except OSError as exc:
            if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
                return None
    pid = listening_pid(port)
    if pid is None:
        return "another program"
    with contextlib.suppress(psutil.Error):
        proc = psutil.Process(pid)
        words = vllm_args.mask_secrets(proc.cmdline())[:3]
        shown = f"pid {pid} ({' '.join(words) or proc.name()})"
        profile = tree.launched_for(proc)
        if profile is not None and is_profile_name(profile):
            options = options_of(profile)
            # Said of a profile's file: it may have been renamed while it ran (`stop` finds
            # a server by its profile's file name). A demo's machine needs none.
            in_place = options == profile_option(profile)
            kept = f", with profiles/{profile}.toml in place" if in_place else ""
            shown += (
                f", the server vramtop launched for profile '{profile}' (`vramtop stop "
                f"{options}` ends it{kept})"
            )
        return shown
    return f"pid {pid}"


def listening_pid(port: int) -> int | None:
    """The pid listening on `port`, when the OS lets us see it."""
    try:
        conns = psutil.net_connections(kind="inet")
    except (psutil.Error, OSError):
        conns = []
    for conn in conns:
        listening = conn.status == psutil.CONN_LISTEN and conn.laddr
        if listening and getattr(conn.laddr, "port", None) == port and conn.pid:
            return conn.pid
    return None
