"""vramtop's hand-written code against the library beside it that could do the same, side by
side in one run, each figure with the library's cost over the hand-written code's:

- scrape: one GET of vLLM's /metrics page (the 50 KB page of tests/fixtures/vllm-0.32-cpu)
  on a kept-alive connection, the scraper's work every second: the scraper's own client
  (sources/plain_http.py, through `ServerClient`), `http.client`, and `httpx.Client` (which
  the rest of vramtop uses). CPU of the calling thread per GET, median of interleaved rounds;
  the server runs in another process. What a user would feel is the console's CPU: the
  difference at 1 Hz is set against a minimal Textual app's (one Sparkline updated once a
  second, bench_console.py's floor), measured in the same run;
- alive: whether a recorded process still runs, asked a few times a second (every tick's look
  and housekeeping): `supervisor.tree.process_alive` (psutil: `Process` + `oneshot` for the
  start and the state) against a hand-written read of /proc/PID/stat (start and state; what
  vramtop did until psutil was found to cost too little to matter), microseconds a call and
  the difference at `--asks` a second against the floor;
- settings: a fresh interpreter loading config.toml through settings.py (no pydantic),
  against the same loading plus importing pydantic and validating the file with a pydantic
  model of the same fields: CPU before the console's first frame.

    python -m bench.bench_own_code [--gets 400] [--floor-seconds 20]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil

from vramtop.sources.server_client import ServerClient
from vramtop.supervisor import tree

ROOT = Path(__file__).resolve().parent.parent
METRICS_PAGE = ROOT / "tests" / "fixtures" / "vllm-0.32-cpu" / "metrics.txt"
_SERVER = """
import http.server, sys
page = open(sys.argv[1], "rb").read()
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""
_SETTINGS_TOML = 'interval_s = 1.0\ntheme = "vramtop-dark"\n[keys]\nrelaunch = "ctrl+r"\n'
_LOAD_SETTINGS = """
import resource, sys
from pathlib import Path
from vramtop.settings import load_settings
settings = load_settings(Path(sys.argv[1]))
"""
_WITH_PYDANTIC = """
import tomllib
from pydantic import BaseModel, ConfigDict, Field, field_validator

class PydanticSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    interval_s: float = 1.0
    default_profile: str | None = None
    min_desktop_headroom_gib: float = Field(3.0, ge=0)
    theme: str = "vramtop-dark"
    keys: dict[str, str] = Field(default_factory=dict)
    record_sessions: bool = False
    gpu_probe: str = "auto"

    @field_validator("interval_s")
    @classmethod
    def _interval(cls, value: float) -> float:
        if not 0.2 <= value <= 3600:
            raise ValueError("out of range")
        return value

PydanticSettings.model_validate(tomllib.loads(Path(sys.argv[1]).read_text()))
"""
_CPU = """
usage = resource.getrusage(resource.RUSAGE_SELF)
print(usage.ru_utime + usage.ru_stime)
"""


def _thread_cpu_each(get: Callable[[], object], count: int) -> list[float]:
    times = []
    for _ in range(count):
        start = time.thread_time()
        get()
        times.append(time.thread_time() - start)
    return times


def scrape(gets: int) -> dict[str, float]:
    """Median CPU (s) of one GET of the /metrics page, per client."""
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(METRICS_PAGE)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        url = f"http://127.0.0.1:{int(server.stdout.readline())}"
        own = ServerClient(url, None, 2.0)
        standard = http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=2)
        library = httpx.Client(timeout=2.0)

        def own_get() -> None:
            answer = own.get("/metrics")
            assert not isinstance(answer, Exception) and answer.status == 200

        def standard_get() -> None:
            standard.request("GET", "/metrics")
            response = standard.getresponse()
            response.read().decode()
            assert response.status == 200

        def library_get() -> None:
            response = library.get(f"{url}/metrics")
            assert response.status_code == 200 and response.text

        clients = {"plain_http": own_get, "http.client": standard_get, "httpx": library_get}
        for get in clients.values():  # connected, warm
            _thread_cpu_each(get, 20)
        times: dict[str, list[float]] = {name: [] for name in clients}
        rounds = 10
        for _ in range(rounds):  # interleaved: a busy moment costs every client alike
            for name, get in clients.items():
                times[name] += _thread_cpu_each(get, max(1, gets // rounds))
        own.close()
        standard.close()
        library.close()
        return {name: statistics.median(each) for name, each in times.items()}
    finally:
        server.terminate()
        server.wait(10)


def alive(calls: int) -> dict[str, float]:
    """Median seconds of one ask whether a live process is the one recorded, each way."""
    me = psutil.Process()
    pid, started = me.pid, me.create_time()
    ticks = os.sysconf("SC_CLK_TCK")
    start_ticks = round((started - psutil.boot_time()) * ticks)

    def by_hand() -> bool:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return abs(int(fields[19]) - start_ticks) <= 5 and fields[0] != b"Z"

    assert by_hand() and tree.process_alive(pid, started)
    ways: dict[str, Callable[[], object]] = {
        "/proc by hand": by_hand,
        "psutil": lambda: tree.process_alive(pid, started),
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(10):
        for name, way in ways.items():
            times[name] += _thread_cpu_each(way, max(1, calls // 10))
    return {name: statistics.median(each) for name, each in times.items()}


def settings(runs: int) -> dict[str, float]:
    """Median CPU (s) of a fresh interpreter that loads config.toml, each way."""
    with tempfile.TemporaryDirectory() as home:
        path = Path(home) / "config.toml"
        path.write_text(_SETTINGS_TOML)
        os.chmod(home, 0o700)
        env = {**os.environ, "VRAMTOP_HOME": home, "PYTHONPATH": str(ROOT)}
        ways = {
            "python alone": "import resource\n",
            "settings.py": _LOAD_SETTINGS,
            "settings.py + pydantic model": _LOAD_SETTINGS + _WITH_PYDANTIC,
        }
        times: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(runs):
            for name, code in ways.items():
                out = subprocess.run(
                    [sys.executable, "-c", code + _CPU, str(path)],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                times[name].append(float(out.stdout.split()[-1]))
        return {name: statistics.median(each) for name, each in times.items()}


def floor_cpu_per_s(seconds: float) -> float:
    """CPU seconds a second of a minimal Textual console (bench_console.py's floor)."""
    code = f"from bench.bench_console import child\nchild('floor', {seconds!r}, (120, 40))\n"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return float(result["cpu_s"]) / float(result["wall_s"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gets", type=int, default=400, help="GETs per client")
    parser.add_argument("--calls", type=int, default=2000, help="process_alive asks per way")
    parser.add_argument("--asks", type=float, default=4.0, help="process_alive asks a second")
    parser.add_argument("--runs", type=int, default=5, help="fresh interpreters per way")
    parser.add_argument("--floor-seconds", type=float, default=20.0)
    args = parser.parse_args()
    ms = 1000.0

    floor = floor_cpu_per_s(args.floor_seconds)
    print(f"floor (minimal Textual app, 1 Hz): {floor * ms:.2f} ms CPU a second")

    gets = scrape(args.gets)
    own = gets["plain_http"]
    print("scrape: one GET of the 50 KB /metrics, CPU of the calling thread (median)")
    for name, cpu in gets.items():
        extra = cpu - own
        print(
            f"  {name:12} {cpu * ms:6.3f} ms  x{cpu / own:4.2f} of plain_http; at 1 Hz "
            f"{extra * ms:+.3f} ms a second = {extra / floor:+.1%} of the floor's CPU"
        )

    asks = alive(args.calls)
    hand = asks["/proc by hand"]
    print(f"alive: is a live process the one recorded (median), at {args.asks:g} asks a second")
    for name, cpu in asks.items():
        extra = (cpu - hand) * args.asks
        print(
            f"  {name:13} {cpu * 1e6:6.1f} us  x{cpu / hand:4.2f} of by hand; "
            f"{extra * ms:+.3f} ms a second = {extra / floor:+.1%} of the floor's CPU"
        )

    loads = settings(args.runs)
    bare = loads["python alone"]
    print("settings: a fresh interpreter loading config.toml, process CPU (median)")
    for name, cpu in loads.items():
        print(f"  {name:30} {cpu * ms:7.1f} ms  (+{(cpu - bare) * ms:.1f} ms over python alone)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
