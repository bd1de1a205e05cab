"""The guard's soak: `vramtop guard --demo --auto-remedy between-turns --adaptive` through
`--hours` of simulated calls (a call of 10 to 30 minutes every hour, as a working day has
them), run `--speed` times faster, the coding agent sending throughout.

Printed per simulated hour: the guard's CPU seconds and RSS beside those of the console
watching the same server with `--url` (a terminal of its own, its default 1 s interval), and
what the guard decided. At the end: the steps per call (flapping: more than one step down or
up in one call), the relaunches and their results, and the requests lost (the front door's
`failed` count, where the demo runs behind it; without the door, relaunches the guard took
while requests ran). The guard samples every `--interval` simulated seconds.

    python -m bench.bench_guard_soak [--hours 8] [--speed 60] [--interval 5]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vramtop.sim.world_protocol import WorldClient, WorldUnreachable

HOUR_S = 3600.0


def scenario(hours: float) -> dict[str, Any]:
    """The field report's desktop; one call an hour, 10 to 30 minutes long, from minute 5
    (a day shorter than an hour gets one call of a third of it)."""
    calls = []
    if hours < 1:
        span = hours * HOUR_S
        calls.append({"start": span / 6, "end": span / 6 + span / 3})
    for hour in range(int(hours)):
        length = (10 + 10 * (hour % 3)) * 60
        start = hour * HOUR_S + 300
        calls.append({"start": start, "end": start + length})
    return {
        "name": "soak",
        "description": "one call an hour",
        "desktop": [
            {"name": "dwm.exe", "idle_gib": 0.55, "call_gib": 0.45},
            {"name": "msedge.exe", "idle_gib": 0.65},
            {"name": "ms-teams.exe", "idle_gib": 0.15, "call_gib": 2.5},
        ],
        "call_ramp_up_s": 4,
        "call_ramp_down_s": 5,
        "calls": calls,
    }


def cpu_s(pid: int) -> float:
    """The process's own CPU seconds (user + system; not its children's)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class Console:
    """`vramtop --url URL` in a pty of its own (120x40), its output drained."""

    pid: int
    fd: int
    done: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def start(cls, url: str, env: dict[str, str]) -> Console:
        argv = [sys.executable, "-m", "vramtop", "--url", url]
        pid, fd = pty.fork()
        if pid == 0:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
            os.execvpe(argv[0], argv, {**env, "TERM": "xterm-256color"})
        console = cls(pid, fd)
        threading.Thread(target=console._drain, daemon=True).start()
        return console

    def _drain(self) -> None:  # a terminal nobody reads would block the app's writes
        while not self.done.is_set():
            try:
                if select.select([self.fd], [], [], 0.2)[0] and not os.read(self.fd, 65536):
                    return
            except OSError:
                return

    def stop(self) -> None:
        self.done.set()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        time.sleep(0.5)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def vramtop(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vramtop", *args], capture_output=True, text=True, env=env
    )


def wait_for_url(
    env: dict[str, str], guard: subprocess.Popen[str], timeout_s: float = 60.0
) -> str | None:
    """vLLM's own URL once the guard's server runs (behind the door where there is one)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and guard.poll() is None:
        done = vramtop(env, "status", "--demo", "--json")
        with contextlib.suppress(ValueError):
            data = json.loads(done.stdout)
            if data.get("state") == "running":
                port = data.get("internal_port")
                return f"http://127.0.0.1:{port}" if port else str(data["url"])
        time.sleep(0.5)
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=8.0, help="simulated hours")
    parser.add_argument("--speed", type=float, default=60.0, help="simulated seconds a second")
    parser.add_argument("--interval", type=float, default=5.0, help="simulated s per sample")
    parser.add_argument("--settle", type=float, default=300.0)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vramtop-soak-"))
    plan = scenario(args.hours)
    (work / "soak.json").write_text(json.dumps(plan))
    env = {
        **os.environ,
        "VRAMTOP_HOME": os.environ.get("VRAMTOP_HOME", str(work / "home")),
        "VRAMTOP_SIM_SCENARIO": str(work / "soak.json"),
        "VRAMTOP_SIM_SPEED": str(args.speed),
        "VRAMTOP_SIM_STARTUP_S": "0.5",
    }
    guard = subprocess.Popen(
        [
            *(sys.executable, "-m", "vramtop", "guard", "--demo"),
            *("--auto-remedy", "between-turns", "--adaptive", "--settle", str(args.settle)),
            *("--interval", str(args.interval), "--notify", "terminal"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    world = WorldClient(Path(env["VRAMTOP_HOME"]) / "state" / "demo" / "gpu.sock")
    console: Console | None = None
    try:
        url = wait_for_url(env, guard)
        if url is None or guard.poll() is not None:
            print(
                f"the guard's server did not come up: {guard.stderr.read() if guard.stderr else ''}"
            )
            return 1
        console = Console.start(url, env)
        return soak(args, guard, console, world, env, plan)
    finally:
        if guard.poll() is None:
            guard.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                guard.wait(150)
        if console is not None:
            console.stop()
        vramtop(env, "stop", "--demo")
        with contextlib.suppress(WorldUnreachable):
            world.request("shutdown")


def sim_t(world: WorldClient) -> float | None:
    try:
        return float(world.request("ping")["t"])
    except (WorldUnreachable, KeyError, TypeError, ValueError):
        return None


def soak(
    args: argparse.Namespace,
    guard: subprocess.Popen[str],
    console: Console,
    world: WorldClient,
    env: dict[str, str],
    plan: dict[str, Any],
) -> int:
    end_t = args.hours * HOUR_S
    began_t = sim_t(world) or 0.0
    began_wall = time.monotonic()
    marks = [(began_t, cpu_s(guard.pid), cpu_s(console.pid), began_wall)]
    hour = min(HOUR_S, end_t)
    print(
        "sim hour  guard CPU s  RSS MiB  ms/sample   console CPU s  RSS MiB  ms/sample   "
        "CPU ratio (guard/console): per hour, per sample"
    )
    while True:
        t = sim_t(world)
        if guard.poll() is not None:
            print("the guard ended early:", guard.stderr.read() if guard.stderr else "")
            return 1
        if (t is not None and t >= began_t + hour * len(marks)) or (t or 0) >= end_t:
            g, c, now = cpu_s(guard.pid), cpu_s(console.pid), time.monotonic()
            last = marks[-1]
            dg, dc = g - last[1], c - last[2]
            # The guard samples each `interval` simulated seconds; the console each second.
            g_samples = max(1.0, ((t or 0.0) - last[0]) / args.interval)
            c_samples = max(1.0, now - last[3])
            g_ms, c_ms = 1000 * dg / g_samples, 1000 * dc / c_samples
            print(
                f"{len(marks):8d}  {dg:11.2f}  {rss_mib(guard.pid):7.1f}  {g_ms:9.2f}   "
                f"{dc:13.2f}  {rss_mib(console.pid):7.1f}  {c_ms:9.2f}   "
                f"{_ratio(dg, dc)}, {_ratio(g_ms, c_ms)}"
            )
            marks.append((t or 0.0, g, c, now))
            if (t or 0) >= end_t or len(marks) > args.hours + 1:
                break
        time.sleep(0.5)
    wall = time.monotonic() - began_wall
    guard.send_signal(signal.SIGTERM)
    _, err = guard.communicate(timeout=150)
    summary(env, plan, err, wall, args)
    return 0


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "n/a"


def summary(
    env: dict[str, str], plan: dict[str, Any], err: str, wall: float, args: argparse.Namespace
) -> None:
    listed = vramtop(env, "events", "--demo", "--json")
    try:
        events = json.loads(listed.stdout)["events"]
    except (ValueError, KeyError):
        events = []
    guard = [e["detail"] for e in events if e["event"] == "guard"]
    acted = [d for d in guard if d.get("decision") == "acted"]
    done = [d for d in guard if d.get("decision") == "done"]
    decisions: dict[str, int] = {}
    for d in guard:
        decisions[d.get("decision", "?")] = decisions.get(d.get("decision", "?"), 0) + 1
    downs = sum(1 for d in done if d.get("step") == "down" and d.get("result") == "ok")
    ups = sum(1 for d in done if d.get("step") == "up" and d.get("result") == "ok")
    calls = len(plan["calls"])
    # Acted without a quiet moment and without the door holding the requests: a request cut.
    cut = [d for d in acted if not str(d.get("why", "")).startswith(("no request", "the front"))]
    status = vramtop(env, "status", "--demo", "--json")
    door: dict[str, Any] = {}
    with contextlib.suppress(ValueError):
        door = (json.loads(status.stdout).get("door") or {}) if status.stdout else {}
    print(
        f"{args.hours:g} simulated hours in {wall:.0f} s (speed ×{args.speed:g}, a sample every "
        f"{args.interval:g} simulated s): {calls} calls; steps down {downs}, up {ups} "
        f"(flapping: {'none' if downs <= calls and ups <= calls else 'yes'}); decisions "
        f"{json.dumps(decisions, sort_keys=True)}"
    )
    relaunches = [e for e in events if e["event"] == "relaunch"]
    results = sorted({str(e["detail"].get("result")) for e in relaunches})
    print(
        f"relaunches: {len(relaunches)} ({', '.join(results) or 'none'}); "
        f"acted while requests ran without the door holding them: {len(cut)}; "
        f"the door's failed requests: {door.get('failed', 'no door')}"
    )
    if "Traceback" in err:
        print("the guard's stderr has a traceback:", err[-2000:])


if __name__ == "__main__":
    sys.exit(main())
