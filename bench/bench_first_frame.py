"""Time from launching a command to its first painted frame, in a real terminal (a pty of
120x40): `vramtop --url` against a ready (simulated) server and `vramtop --demo`, against a
minimal Textual app (one Label) in the same terminal.

The clock starts just before the process is launched and stops when the text that marks the
frame has come out of the terminal (escape sequences removed): the console's layout ("VRAM
split") for the first frame, and for `--url` also the KV pool's token count, the first frame
with the server's data. Beside the wall time, the CPU the process had used by then (from
/proc, all its threads): on a busy machine the wall time swings with everyone else's work,
the CPU much less. Modules are byte-compiled as installed (PYTHONDONTWRITEBYTECODE is
dropped; a first run writes them). Medians of --runs, the commands taking turns; wall times
swing with the machine's load, so the ratios to the minimal app are the figures to read.

`--baseline DIR` also runs the console's commands from another checkout (DIR, e.g. a `git
worktree` of the revision before a change), all taking turns, so that before and after see
the same load.

    python -m bench.bench_first_frame [--runs 5] [--timeout 60] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import re
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time

SIZE = (40, 120)  # rows, columns
BASELINE_MARK = "BENCH_FIRST_FRAME_BASELINE"  # in a baseline command's environment
ANSI = re.compile(rb"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[PX^_][^\x1b]*\x1b\\|.)")
FLOOR_APP = """
from textual.app import App, ComposeResult
from textual.widgets import Label

class Floor(App[None]):
    def compose(self) -> ComposeResult:
        yield Label("floor ready")

Floor().run()
"""


def cpu_s(pid: int) -> float:
    """The process's CPU so far (user + system, all threads)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def until_marks(argv: list[str], env: dict[str, str], marks: list[bytes], timeout: float):  # type: ignore[no-untyped-def]
    """(wall seconds, CPU seconds) from launch to each mark's first appearance on the
    terminal (None: never). A baseline's command runs in its checkout (`python -m` looks in
    the current folder before PYTHONPATH)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the terminal's size, then the command
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", *SIZE, 0, 0))
        if env.get(BASELINE_MARK):
            os.chdir(env["PYTHONPATH"])
        os.execve(argv[0], argv, env)
    start = time.monotonic()
    seen: dict[bytes, tuple[float, float]] = {}
    text = b""
    try:
        while len(seen) < len(marks) and time.monotonic() - start < timeout:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            now = time.monotonic() - start
            text += chunk
            plain = ANSI.sub(b"", text)
            for mark in marks:
                if mark not in seen and re.search(mark, plain):
                    seen[mark] = (now, cpu_s(pid))
    finally:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:  # drain, so a child writing its goodbye never blocks on a full pty
                if select.select([fd], [], [], 0.05)[0]:
                    os.read(fd, 65536)
            except OSError:
                pass
            if os.waitpid(pid, os.WNOHANG) != (0, 0):
                break
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    return [seen.get(mark) for mark in marks]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a frame")
    parser.add_argument("--only", default="url,demo", help="url, demo or both")
    parser.add_argument(
        "--baseline", default=None, help="another checkout to run the same commands from"
    )
    args = parser.parse_args()
    kinds = args.only.split(",")
    vramtop = [sys.executable, "-m", "vramtop"]
    layout, tokens = rb"VRAM split", rb"[\d,]+ tokens"
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(
            VRAMTOP_HOME=os.path.join(home, "url"),
            VRAMTOP_SIM_STARTUP_S="0.3",
            TERM="xterm-256color",
            PYTHONPATH=os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")]),
        )
        subprocess.run([*vramtop, "start", "--demo"], env=env, check=True, capture_output=True)
        demo_envs: list[dict[str, str]] = []
        times: dict[str, list[tuple[float, float]]] = {}
        try:
            status = subprocess.run(
                [*vramtop, "status", "--demo", "--json"], env=env, capture_output=True, text=True
            )
            url = f"http://127.0.0.1:{json.loads(status.stdout)['port']}"
            runs: dict[str, tuple[list[str], list[bytes], dict[str, str]]] = {
                "floor": ([sys.executable, "-c", FLOOR_APP], [rb"floor ready"], env),
            }
            # The baseline's commands: its modules first on the path (the simulated processes
            # they start inherit it).
            before = (
                {**env, "PYTHONPATH": os.path.abspath(args.baseline), BASELINE_MARK: "1"}
                if args.baseline
                else None
            )
            for suffix, kind_env in (("", env), (" before", before)):
                if kind_env is None:
                    continue
                if "url" in kinds:
                    runs["url" + suffix] = ([*vramtop, "--url", url], [layout, tokens], kind_env)
                if "demo" in kinds:  # a home of its own: its simulated machine stays up
                    demo_home = os.path.join(home, "demo" + suffix.replace(" ", "-"))
                    demo_envs.append({**kind_env, "VRAMTOP_HOME": demo_home})
                    runs["demo" + suffix] = ([*vramtop, "--demo"], [layout], demo_envs[-1])
            for argv, marks, run_env in runs.values():  # a first run writes the .pyc files
                until_marks(argv, run_env, marks, args.timeout)
            for _ in range(args.runs):
                for kind, (argv, marks, run_env) in runs.items():
                    found = until_marks(argv, run_env, marks, args.timeout)
                    for mark, seconds in zip(marks, found, strict=True):
                        if seconds is None:
                            raise SystemExit(f"{kind}: no {mark.decode()!r} within the timeout")
                        label = kind if mark != tokens else kind.replace("url", "url-data")
                        times.setdefault(label, []).append(seconds)
        finally:
            subprocess.run([*vramtop, "stop", "--demo"], env=env, capture_output=True)
            for demo_env in demo_envs:
                subprocess.run([*vramtop, "stop", "--demo"], env=demo_env, capture_output=True)

    floor = statistics.median(t for t, _ in times["floor"])
    floor_cpu = statistics.median(c for _, c in times["floor"])
    labels = {
        "floor": "minimal Textual app (one Label)",
        "url": "vramtop --url, first frame",
        "url-data": "vramtop --url, first frame w/ data",
        "demo": "vramtop --demo, first frame",
    }
    for label, values in sorted(times.items(), key=lambda item: _order(item[0])):
        name = labels[label.removesuffix(" before")] + (" (baseline)" if "before" in label else "")
        median = statistics.median(t for t, _ in values)
        cpu = statistics.median(c for _, c in values)
        spread = ", ".join(f"{t:.2f}" for t, _ in values)
        ratio = (
            ""
            if label == "floor"
            else f"  ratio {median / floor:.2f}x (target <= 1.5x), CPU {cpu / floor_cpu:.2f}x"
        )
        print(
            f"{name:<47} {median * 1000:6.0f} ms median ({spread}), CPU {cpu * 1000:4.0f} ms{ratio}"
        )
    return 0


def _order(label: str) -> tuple[int, bool]:
    """The minimal app first, then each command's baseline just above it."""
    kinds = ["floor", "url", "url-data", "demo"]
    return kinds.index(label.removesuffix(" before")), "before" not in label


if __name__ == "__main__":
    sys.exit(main())
