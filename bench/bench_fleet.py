"""The fleet console's own CPU over a minute, beside one `vramtop --url` console, ratio in one
run.

Three demo exporters (`vramtop export --demo --card 5090|spark|r9700`, each with a home of its
own) serve the boxes; their simulated machines run in other processes and are not counted.
Each console runs headless in a child process of its own, all at the same time, and reports
its own CPU time (user + system, all threads, getrusage) over `--seconds` after `--settle`:

- url: the console watching one box's simulated vLLM (`vramtop --url http://…`: watching
  only), the baseline;
- fleet: `vramtop fleet desk=… spark=… r9700=…`, reading the three exporters;
- fleet-prometheus (where Debian's `prometheus` is on PATH, `--only` to choose): the same
  rows through a real Prometheus scraping the three every second.

    python -m bench.bench_fleet [--seconds 60] [--settle 5] [--size 120x40]
                                [--only url,fleet,fleet-prometheus]

Prints each run's CPU seconds and its ratio to url's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench._measured import collected

CARDS = {"desk": "5090", "spark": "spark", "r9700": "r9700"}
SERVING = re.compile(r"serving http://127\.0\.0\.1:(\d+)/metrics")
START_S = 120.0  # an exporter's start and its simulated server's, on a loaded machine
KINDS = ("url", "fleet", "fleet-prometheus")
EXPORT = (sys.executable, "-m", "vramtop", "export", "--demo", "--card")


def child(kind: str, target: str, seconds: float, settle_s: float, size: tuple[int, int]) -> None:
    """One console, headless; prints {"cpu_s", "wall_s"} as JSON."""
    from bench._measured import measured_run

    app: Any
    if kind == "url":
        from vramtop.machines.machine_backend import live_backend
        from vramtop.settings import Settings
        from vramtop.tui.app import VramtopApp

        app = VramtopApp(live_backend(None, target, None), Settings(interval_s=1.0))
    else:
        from vramtop.core.fleet_sources import Sources, parse_boxes
        from vramtop.tui.fleet.fleet_app import FleetApp

        sources = (
            Sources(prometheus=target)
            if kind == "fleet-prometheus"
            else Sources(boxes=tuple(parse_boxes(target.split())))
        )
        app = FleetApp(sources)
    print(json.dumps(measured_run(app, seconds, size, settle_s)))


def _wait(what: str, ready: Any, deadline_s: float = START_S) -> Any:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = ready()
        if value:
            return value
        time.sleep(0.5)  # a bench script, not a test: polling a child's start
    raise SystemExit(f"{what} did not happen within {deadline_s:.0f} s")


@contextmanager
def exporters(homes: Path) -> Iterator[dict[str, tuple[str, str]]]:
    """The three demo exporters; yields name -> (metrics URL, its simulated vLLM's URL)."""
    procs: dict[str, subprocess.Popen[str]] = {}
    try:
        for name, card in CARDS.items():
            log = homes / f"{name}.log"
            procs[name] = subprocess.Popen(
                [*EXPORT, card, "--listen", "127.0.0.1:0"],
                stdout=log.open("w"),
                stderr=subprocess.STDOUT,
                text=True,
                env={**os.environ, "VRAMTOP_HOME": str(homes / name)},
            )
        urls = {}
        for name in CARDS:
            log = homes / f"{name}.log"
            port = _wait(
                f"{name}'s exporter to serve", lambda log=log: SERVING.search(log.read_text())
            )
            urls[name] = f"http://127.0.0.1:{port.group(1)}/metrics"
        servers = {name: _wait(f"{name}'s server", _server_of(homes / name)) for name in CARDS}
        yield {name: (urls[name], servers[name]) for name in CARDS}
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()


def _server_of(home: Path) -> Any:
    return lambda: _server_url(home)


def _server_url(home: Path) -> str | None:
    done = subprocess.run(
        [sys.executable, "-m", "vramtop", "status", "--demo", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "VRAMTOP_HOME": str(home)},
    )
    try:
        state = json.loads(done.stdout)
    except ValueError:
        return None
    if state.get("phase") != "ready" or not state.get("port"):
        return None
    return f"http://127.0.0.1:{state['port']}"


@contextmanager
def prometheus(homes: Path, metrics: list[str]) -> Iterator[str]:
    binary = shutil.which("prometheus")
    assert binary is not None
    targets = [url.removeprefix("http://").removesuffix("/metrics") for url in metrics]
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": [{"job_name": "vramtop", "static_configs": [{"targets": targets}]}],
    }
    (homes / "prometheus.yml").write_text(json.dumps(config))  # YAML reads JSON
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={homes / 'prometheus.yml'}",
            f"--storage.tsdb.path={homes / 'prometheus'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        import httpx

        def ready() -> bool:
            try:
                return httpx.get(f"{base}/-/ready", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        _wait("Prometheus to be ready", ready)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", choices=KINDS)
    parser.add_argument("--target", default="")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--size", default="120x40")
    parser.add_argument("--only", default=None, help="runs, comma-separated (url is the baseline)")
    args = parser.parse_args()
    width, height = (int(part) for part in args.size.split("x"))
    if args.child:
        child(args.child, args.target, args.seconds, args.settle, (width, height))
        return
    kinds = args.only.split(",") if args.only else list(KINDS)
    if "fleet-prometheus" in kinds and shutil.which("prometheus") is None:
        print("prometheus is not on PATH: fleet-prometheus left out", file=sys.stderr)
        kinds.remove("fleet-prometheus")
    if "url" not in kinds:
        kinds.insert(0, "url")
    with tempfile.TemporaryDirectory() as tmp, exporters(Path(tmp)) as boxes:
        homes = Path(tmp)
        targets = {
            "url": boxes["desk"][1],
            "fleet": " ".join(f"{name}={metrics}" for name, (metrics, _) in boxes.items()),
        }
        with maybe_prometheus(kinds, homes, [metrics for metrics, _ in boxes.values()]) as prom:
            if prom:
                targets["fleet-prometheus"] = prom
            results = run_children(kinds, targets, args, homes)
    base = results["url"]["cpu_s"]
    print(f"{'run':<18} {'CPU s':>7} {'wall s':>7} {'× url':>6}")
    for kind, result in results.items():
        ratio = result["cpu_s"] / base if base > 0 else float("nan")
        print(f"{kind:<18} {result['cpu_s']:>7.2f} {result['wall_s']:>7.1f} {ratio:>6.2f}")


@contextmanager
def maybe_prometheus(kinds: list[str], homes: Path, metrics: list[str]) -> Iterator[str | None]:
    if "fleet-prometheus" not in kinds:
        yield None
        return
    with prometheus(homes, metrics) as base:
        time.sleep(3)  # a few scrapes first, so that each box has its rate window
        yield base


def run_children(
    kinds: list[str], targets: dict[str, str], args: argparse.Namespace, homes: Path
) -> dict[str, dict[str, float]]:
    """Every run at the same time, each in a child of its own, with a home of its own."""
    children = {}
    for kind in kinds:
        home = homes / f"console-{kind}"
        home.mkdir(mode=0o700)
        children[kind] = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--child",
                kind,
                "--target",
                targets[kind],
                "--seconds",
                str(args.seconds),
                "--settle",
                str(args.settle),
                "--size",
                args.size,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "VRAMTOP_HOME": str(home)},
        )
    return collected(children)


if __name__ == "__main__":
    main()
