"""vramtop's own CPU while showing the demo at 1 Hz, against a one-Sparkline Textual app.

Each app runs headless in its own child process, which reports its own CPU time (user + system,
all threads) via getrusage; nothing else on the machine is counted. The runs (`--only`):

- floor: a minimal Textual app updating one Sparkline at 1 Hz;
- demo: vramtop's console on the demo (`vramtop --demo`), measured once the simulated vLLM is
  serving. The simulator (GPU, server, and the agent sending it requests) runs in other
  processes and is not counted. This is the figure the target applies to: at most 1.5× the
  floor;
- ui: the console on the deterministic fake backend (no reads at all): what drawing costs;
- ui-log: the same, while the server writes `--log-rate` lines a second (20 by default) to
  its log; ui-log - ui is what the server log costs at that rate. `--log-kind` says which
  lines: "access" (vLLM's request lines, which fold into one row: the default) or
  "distinct" (lines that each say something else, so that each is a row: the worst case).
  Several rates or kinds (`--log-rate 5,20,100 --log-kind access,distinct`) run one ui-log
  each, side by side, to show how the log's cost follows the rate;
- floor-log (not run by default): the floor app with Textual's own `Log` widget, as tall as
  the console's log panel, written the first `--log-rate` lines a second of the first
  `--log-kind`: (floor-log - floor)/floor is what Textual itself costs to show each line of a
  log that scrolls, the least any log panel that shows each line costs (lines that never
  fold, and a log that does not fold at all);
- reads, still-log (not run by default): the demo with one part left out once the server
  serves, to see what each part costs. "reads" reads as the demo does but draws nothing
  (the reads and the samples' messages); "still-log" draws all but the server log's new
  lines. So demo - still-log is the log, and still-log - reads the header and panels.

    python -m bench.bench_console [--seconds 60] [--size 120x40] [--only floor,demo,ui]
                                  [--repeat N] [--apart] [--settle S]
                                  [--log-rate 20[,R...]] [--log-kind access[,distinct]]
    python -m bench.bench_console --real [--streams 3] [--seconds 60] [--settle 15]
    python -m bench.bench_console ... --baseline DIR

--guard measures the guard beside the console that watches the same server: `vramtop guard
--demo` (1 s samples, notices to the terminal) starts the demo's server, and `vramtop --url` on
vLLM's own address (in a terminal of its own, 120x40) watches it, side by side over the same
seconds; each one's own CPU (not its children's: the simulator runs in other processes),
and guard/url (target <= 1.0x).

    python -m bench.bench_console --guard [--seconds 60] [--settle 5] [--repeat N]

--real measures where users run it: the real vLLM of the end-to-end tests (VRAMTOP_VLLM_PYTHON,
VRAMTOP_TINY_MODEL; started once, by a profile) under a bounded streaming load of this
script's own (--streams requests at a time, 400 tokens each, over and over), with the runs
url (`vramtop --url`: watching only), profile (`vramtop` with the profile: its server's log
too) and the floor, side by side (and vllmstat `-i 1` in a terminal of its own, when this
Python can import it); targets: profile <= 1.5x, url <= 1.4x the floor. The load and the
server run in other processes or threads and are not counted.

The runs go side by side, at the same time: the floor itself moved from 0.18 to 0.40 s a
minute from one minute to the next on a shared machine, and a floor measured in another minute
than the demo made the ratio swing with it. `--apart` runs them one after the other instead.
With --repeat N it is all done N times and the median ratio is printed too.

Even side by side, a ratio to the floor moves by about 0.2x from one minute to the next on a
shared machine, more than many a change. `--baseline DIR` runs another checkout's children too
(DIR, e.g. a `git worktree` of the revision before a change, with a virtual environment of its
own: DIR/.venv/bin/python DIR/bench/bench_console.py --child ...), each beside this one's run
of the same kind, in the same minute and with the same home (with --real: the same server,
profile and log). Each run but the floor and vllmstat gets such a twin (with --real: url and
profile); for each, new/floor, old/floor and new/old are printed per run and, with --repeat,
as medians. With --apart, each run and its twin still go side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from bench._measured import collected

WARMUP_S = 3.0  # after the server serves: the first samples carry one-off work (startup facts)


def child(
    kind: str,
    seconds: float,
    size: tuple[int, int],
    settle_s: float = WARMUP_S,
    log_rate: float = 0.0,
    log_kind: str = "access",
) -> None:
    from bench._bench_apps import FloorApp, FloorLogApp, console_app, demo_console_app
    from bench._measured import measured_run

    app: Any
    if kind == "vllmstat":
        external_child(seconds, size, settle_s)
        return
    ready: Callable[[], bool]
    close: Callable[[], None]
    if kind in REAL_KINDS:
        from vramtop.machines.machine_backend import live_backend
        from vramtop.profiles import load_profile
        from vramtop.settings import Settings
        from vramtop.tui.app import VramtopApp

        profile = load_profile(REAL_PROFILE)
        backend = (
            live_backend(profile, None, None)
            if kind == "profile"
            else live_backend(None, profile.url, None)
        )
        app = VramtopApp(backend, Settings(interval_s=1.0))
        ready, close = (lambda: True), (lambda: None)
    elif kind in DEMO_KINDS:
        app, ready, close = demo_console_app(part=None if kind == "demo" else kind)
    else:
        if kind == "ui":
            app = console_app()
        elif kind == "ui-log":
            app = console_app(log_rate=log_rate, log_kind=log_kind)
        elif kind == "floor-log":
            app = FloorLogApp(log_rate, log_kind)
        else:
            app = FloorApp()
        ready, close = (lambda: True), (lambda: None)
    if not isinstance(app, (FloorApp, FloorLogApp)):
        # The console starts as the vramtop command starts it: the collector held off until
        # it has settled (vramtop/entry.py, then VramtopApp's own set-aside).
        gc.disable()
    result = measured_run(app, seconds, size, settle_s, ready)
    close()
    print(json.dumps(result))


def external_child(seconds: float, size: tuple[int, int], settle_s: float) -> None:
    """vllmstat (`-i 1`) on the profile's server, in a terminal of its own (a pty of `size`):
    its CPU (all threads, from /proc) over `seconds` after `settle_s`."""
    import fcntl
    import pty
    import select
    import signal
    import struct
    import termios
    import threading

    from vramtop.profiles import load_profile

    url = load_profile(REAL_PROFILE).url
    argv = [sys.executable, "-m", "vllmstat", "-u", url, "-i", "1"]
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        os.execvpe(argv[0], argv, {**os.environ, "TERM": "xterm-256color"})
    done = threading.Event()

    def drain() -> None:  # a terminal nobody reads would block the app's writes
        while not done.is_set():
            try:
                if select.select([fd], [], [], 0.2)[0] and not os.read(fd, 65536):
                    return
            except OSError:
                return

    threading.Thread(target=drain, daemon=True).start()

    def cpu() -> float:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    try:
        time.sleep(1.0 + settle_s)
        start_cpu, start_wall = cpu(), time.monotonic()
        time.sleep(seconds)
        result = {"cpu_s": cpu() - start_cpu, "wall_s": time.monotonic() - start_wall}
    finally:
        done.set()
        os.kill(pid, signal.SIGTERM)
        time.sleep(0.5)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    print(json.dumps(result))


def log_run(rate: float, kind: str) -> str:
    """The name of a ui-log run at `rate` lines a second of `kind` (one of several)."""
    return f"ui-log {rate:g}/s {kind}"


class Run(NamedTuple):
    """One child: what it runs, and from which checkout."""

    kind: str
    log_rate: float = 0.0
    log_kind: str = "access"
    checkout: str | None = None  # another checkout's child (--baseline); None: this one's


def baseline_run(name: str) -> str:
    """The name of the baseline's twin of the run `name`."""
    return f"{name}{BASELINE_SUFFIX}"


def child_argv(run: Run, args: list[str]) -> list[str]:
    """The command line of `run`'s child, from its checkout."""
    python, script = (
        (sys.executable, __file__)
        if run.checkout is None
        else (os.path.join(run.checkout, BASELINE_PYTHON), os.path.join(run.checkout, SCRIPT))
    )
    log = ("--log-rate", str(run.log_rate), "--log-kind", run.log_kind)
    return [python, script, "--child", run.kind, *args, *(log if run.kind in LOG_RUNS else ())]


def measure(
    kinds: list[str],
    seconds: float,
    size: str,
    settle_s: float = WARMUP_S,
    log_rate: float = 0.0,
    real_home: str | None = None,
    log_runs: list[tuple[float, str]] | None = None,
    baseline: str | None = None,
    log_kind: str = "access",
) -> dict[str, dict[str, float]]:
    """Run each app in a child of its own, all at once: whatever else the machine does in
    that minute (its clock speed, other tenants) weighs on each of them alike.

    With `log_runs` (rate, kind), ui-log runs once for each, named by `log_run`. With
    `baseline` (another checkout), each of vramtop's runs has a twin from there right after
    it, named by `baseline_run`. Otherwise ui-log and floor-log write `log_rate` lines a
    second of `log_kind`."""
    runs = {kind: Run(kind, log_rate, log_kind) for kind in kinds}
    if log_runs and "ui-log" in runs:
        del runs["ui-log"]
        runs.update({log_run(rate, kind): Run("ui-log", rate, kind) for rate, kind in log_runs})
    if baseline:
        paired = {}
        for name, run in runs.items():
            paired[name] = run
            if run.kind in COMPARED:
                paired[baseline_run(name)] = run._replace(checkout=baseline)
        runs = paired
    with tempfile.TemporaryDirectory() as homes:
        # Each run's state (simulated GPU socket, server log) in a throwaway home of its own:
        # each demo run has a simulated machine of its own. The simulated server starts
        # quickly.
        args = ["--seconds", str(seconds), "--size", size, "--settle", str(settle_s)]
        children = {
            name: subprocess.Popen(
                child_argv(run, args),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=run.checkout,
                env={
                    **os.environ,
                    # A baseline's child imports its own checkout's modules, never ours.
                    **({"PYTHONPATH": run.checkout} if run.checkout else {}),
                    "VRAMTOP_HOME": real_home
                    if real_home and run.kind in REAL_KINDS
                    else os.path.join(homes, re.sub(r"[/()]", "", name.replace(" ", "-"))),
                    "VRAMTOP_SIM_STARTUP_S": "0.3",
                },
            )
            for name, run in runs.items()
        }
        return collected(children)


def baseline_problem(checkout: str, kinds: list[str]) -> str | None:
    """Why `checkout` cannot run the children of `kinds` beside this one's; None: it can."""
    python = os.path.join(checkout, BASELINE_PYTHON)
    if not os.access(python, os.X_OK):
        return (
            f"--baseline {checkout}: there is no {python}. Give that checkout a virtual "
            "environment of its own: in it, python3 -m venv .venv && .venv/bin/pip install "
            "-e '.[dev]'"
        )
    try:
        done = subprocess.run(
            [python, SCRIPT, "--help"], capture_output=True, text=True, timeout=60, cwd=checkout
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"--baseline {checkout}: its {SCRIPT} --help did not answer ({error})"
    # argparse shows a flag's choices in braces: --child {floor,demo,...}
    found = re.search(r"--child \{([^}]*)\}", done.stdout)
    known = found.group(1).split(",") if found else []
    flags = ["--seconds", "--size", "--settle"]
    if "ui-log" in kinds:
        flags += ["--log-rate", "--log-kind"]
    missing = [f"--child {kind}" for kind in kinds if kind not in known]
    missing += [flag for flag in flags if flag not in done.stdout]
    if done.returncode != 0 or missing:
        return (
            f"--baseline {checkout}: its {SCRIPT} lacks what this one runs its children with "
            f"({', '.join(missing) or 'its --help failed'}). Take a later revision as the "
            "baseline."
        )
    return None


LABELS = {
    "floor": "floor (1 Sparkline @1 Hz)",
    "demo": "vramtop --demo @1 Hz",
    "ui": "console, fake backend",
    "ui-log": "console, fake backend + log",
    "floor-log": "floor + Textual's own Log",
    "reads": "demo, reads only",
    "still-log": "demo, log held still",
    "url": "vramtop --url, real vLLM",
    "profile": "vramtop (profile), real vLLM",
    "vllmstat": "vllmstat -i 1, real vLLM",
}
KINDS = tuple(LABELS)
# The demo, whole or with the part of that name left out once the server serves (see
# demo_console_app).
DEMO_KINDS = ("demo", "reads", "still-log")
# The real server's runs (--real), and the profile they share.
REAL_KINDS = ("url", "profile", "vllmstat")
REAL_PROFILE = "bench-console"
# vramtop's own runs: those --baseline gives a twin from the other checkout.
COMPARED = tuple(kind for kind in KINDS if kind not in ("floor", "floor-log", "vllmstat"))
# The runs whose children are told a log rate and kind.
LOG_RUNS = ("ui-log", "floor-log")
BASELINE_SUFFIX = " (baseline)"
BASELINE_PYTHON = os.path.join(".venv", "bin", "python")  # in the baseline's checkout
SCRIPT = os.path.join("bench", "bench_console.py")
TARGETS = {"demo": 2.0, "url": 1.4, "profile": 1.5}
LOG_KINDS = ("access", "distinct")
BASELINE_RATIOS = ("new/floor", "old/floor", "new/old")


def report(results: dict[str, dict[str, float]], log_rate: float = 0.0) -> dict[str, float]:
    """Print one run's figures; its ratios to the floor."""
    for kind, r in results.items():
        share = r["cpu_s"] / r["wall_s"] * 100
        name = kind.removesuffix(BASELINE_SUFFIX)
        label = LABELS.get(name, name) + kind[len(name) :]
        print(
            f"{label:<27} cpu {r['cpu_s']:.3f} s over {r['wall_s']:.1f} s ({share:.2f} % of a core)"
        )
    ratios = {}
    floor = results.get("floor", {}).get("cpu_s")
    for kind in KINDS[1:]:
        if floor and kind in results:
            ratios[kind] = results[kind]["cpu_s"] / floor
            target = f" (target <= {TARGETS[kind]:g}x)" if kind in TARGETS else ""
            print(f"ratio {kind}/floor: {ratios[kind]:.2f}x{target}")
    if "vllmstat" in results:
        for kind in ("url", "profile"):
            if kind in results:
                ratios[f"{kind}/vllmstat"] = results[kind]["cpu_s"] / results["vllmstat"]["cpu_s"]
                print(f"ratio {kind}/vllmstat: {ratios[f'{kind}/vllmstat']:.2f}x")
    if floor and "ui" in results and "ui-log" in results:
        ratios["log"] = (results["ui-log"]["cpu_s"] - results["ui"]["cpu_s"]) / floor
        print(
            f"the server log at {log_rate:g} lines/s: (ui-log - ui)/floor = "
            f"{ratios['log']:.2f}x (target <= 0.15x)"
        )
    if floor and "floor-log" in results:
        ratios["textual log"] = (results["floor-log"]["cpu_s"] - floor) / floor
        print(
            f"Textual's own Log at {log_rate:g} lines/s: (floor-log - floor)/floor = "
            f"{ratios['textual log']:.2f}x"
        )
    for name in results:
        if (
            floor
            and "ui" in results
            and name.startswith("ui-log ")
            and not name.endswith(BASELINE_SUFFIX)
        ):
            ratio = (results[name]["cpu_s"] - results["ui"]["cpu_s"]) / floor
            ratios[name.replace("ui-log", "log")] = ratio
            print(f"the server log, {name[len('ui-log ') :]}: (run - ui)/floor = {ratio:.2f}x")
    return ratios


def report_baseline(results: dict[str, dict[str, float]]) -> dict[str, float]:
    """Print each run beside its baseline's twin: new/floor, old/floor and new/old; those
    ratios, named "<run> new/old" and so on."""
    ratios = {}
    floor = results.get("floor", {}).get("cpu_s")
    for name, new in results.items():
        old = results.get(baseline_run(name))
        if old is None:
            continue
        if floor:
            ratios[f"{name} new/floor"] = new["cpu_s"] / floor
            ratios[f"{name} old/floor"] = old["cpu_s"] / floor
        ratios[f"{name} new/old"] = new["cpu_s"] / old["cpu_s"]
        figures = ", ".join(
            f"{which} {ratios[f'{name} {which}']:.2f}x"
            for which in BASELINE_RATIOS
            if f"{name} {which}" in ratios
        )
        print(f"{name} beside the baseline: {figures}")
    return ratios


def print_medians(ratios: dict[str, list[float]], label: Callable[[str], str]) -> None:
    """Each ratio's median over the repeats, with the values it is the median of."""
    for name, values in ratios.items():
        if values:
            spread = ", ".join(f"{v:.2f}" for v in values)
            print(f"median {label(name)}: {statistics.median(values):.2f}x ({spread})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--size", default="120x40")
    parser.add_argument(
        "--only",
        default="floor,demo,ui",
        help="comma-separated runs, of: " + ", ".join(KINDS) + " (reads and still-log are "
        "the demo with a part left out, to see what each part costs)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of each, in turn")
    parser.add_argument(
        "--apart", action="store_true", help="one run after the other, not all at once"
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=WARMUP_S,
        help="seconds from the server serving to the start of the measured minute (the "
        "first minute has a per-second uptime and a growing log; later ones do not)",
    )
    parser.add_argument(
        "--log-rate",
        default="20",
        help="lines a second for ui-log; several, comma-separated, run one ui-log each",
    )
    parser.add_argument(
        "--log-kind",
        default="access",
        help="the lines ui-log's server writes: access (request lines, the default), "
        "distinct (lines that never fold), or both, comma-separated",
    )
    parser.add_argument("--real", action="store_true", help="the real vLLM under load")
    parser.add_argument(
        "--guard",
        action="store_true",
        help="the guard on the demo beside `vramtop --url` on its server: CPU and guard/url",
    )
    parser.add_argument("--streams", type=int, default=3, help="with --real: requests at once")
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        help="another checkout (with its own .venv) whose children run beside this one's, "
        "each beside its own kind (with --real: url and profile; otherwise each run but the "
        "floor): prints new/floor, old/floor and new/old",
    )
    parser.add_argument("--child", choices=KINDS)
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    try:
        rates = [float(rate) for rate in args.log_rate.split(",")]
    except ValueError:
        parser.error(f"--log-rate: numbers, comma-separated, not {args.log_rate!r}")
    log_kinds = args.log_kind.split(",")
    if set(log_kinds) - set(LOG_KINDS):
        parser.error(f"--log-kind: choose from {', '.join(LOG_KINDS)}")
    if args.child:
        child(args.child, args.seconds, (width, height), args.settle, rates[0], log_kinds[0])
        return 0
    asked = ["url", "profile"] if args.real else args.only.split(",")
    unknown = sorted(set(asked) - set(KINDS))
    if unknown:
        parser.error(f"unknown run {', '.join(unknown)}: choose from {', '.join(KINDS)}")
    if args.baseline:
        args.baseline = os.path.abspath(args.baseline)
        problem = baseline_problem(args.baseline, [k for k in COMPARED if k in asked])
        if problem:
            print(problem, file=sys.stderr)
            return 2
    if args.real:
        return real(args)
    if args.guard:
        return guard(args)
    kinds = [k for k in KINDS if k in asked]
    log_runs = [(rate, kind) for kind in log_kinds for rate in rates]
    several = log_runs if len(log_runs) > 1 else None
    ratios: dict[str, list[float]] = {k: [] for k in (*KINDS[1:], "log")}
    beside: dict[str, list[float]] = {}
    for run in range(1, args.repeat + 1):
        if args.repeat > 1:
            print(f"run {run} of {args.repeat}")
        # With --apart, one kind after another (each with its baseline's twin beside it).
        results = {}
        for group in [[k] for k in kinds] if args.apart else [kinds]:
            results.update(
                measure(
                    group,
                    args.seconds,
                    args.size,
                    args.settle,
                    rates[0],
                    None,
                    several,
                    args.baseline,
                    log_kinds[0],
                )
            )
        for kind, ratio in report(results, rates[0]).items():
            ratios.setdefault(kind, []).append(ratio)
        for name, ratio in report_baseline(results).items():
            beside.setdefault(name, []).append(ratio)
    if args.repeat > 1:
        print_medians(
            ratios,
            lambda kind: (
                f"the server log, {kind[len('log ') :]}: (run - ui)/floor"
                if kind.startswith("log ")
                else "Textual's own Log: (floor-log - floor)/floor"
                if kind == "textual log"
                else f"ratio {kind}/floor"
            ),
        )
        print_medians(beside, str)
    return 0


GUARD_TARGET = 1.0  # the guard's CPU at most the --url console's on the same server


def guard(args: argparse.Namespace) -> int:
    """The guard on the demo and `vramtop --url` on its server, side by side: each one's CPU
    over the same `--seconds` after `--settle`, and guard/url, `--repeat` times."""
    from bench.bench_guard_soak import Console, cpu_s, vramtop, wait_for_url
    from vramtop.sim.world_protocol import WorldClient, WorldUnreachable

    work = tempfile.mkdtemp(prefix="vramtop-bench-guard-")
    env = {**os.environ, "VRAMTOP_HOME": os.path.join(work, "home"), "VRAMTOP_SIM_STARTUP_S": "0.3"}
    guarding = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vramtop",
            "guard",
            "--demo",
            "--interval",
            "1",
            "--notify",
            "terminal",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    console: Console | None = None
    ratios: list[float] = []
    try:
        url = wait_for_url(env, guarding)
        if url is None or guarding.poll() is not None:
            error = guarding.stderr.read() if guarding.stderr else ""
            print(f"the guard's server did not come up: {error}")
            return 1
        console = Console.start(url, env)
        time.sleep(1.0 + args.settle)
        for run in range(1, args.repeat + 1):
            if args.repeat > 1:
                print(f"run {run} of {args.repeat}")
            before = cpu_s(guarding.pid), cpu_s(console.pid)
            start = time.monotonic()
            time.sleep(args.seconds)
            wall = time.monotonic() - start
            used = cpu_s(guarding.pid) - before[0], cpu_s(console.pid) - before[1]
            print(f"{'vramtop guard --demo':<27} cpu {used[0]:.3f} s over {wall:.1f} s")
            print(f"{'vramtop --url, its server':<27} cpu {used[1]:.3f} s over {wall:.1f} s")
            if used[1] > 0:
                ratios.append(used[0] / used[1])
                print(f"ratio guard/url: {ratios[-1]:.2f}x (target <= {GUARD_TARGET:g}x)")
    finally:
        if console is not None:
            console.stop()
        if guarding.poll() is None:
            guarding.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                guarding.wait(60)
        vramtop(env, "stop", "--demo")
        with contextlib.suppress(WorldUnreachable):  # else it idles out by itself
            WorldClient(Path(env["VRAMTOP_HOME"], "state", "demo", "gpu.sock")).request("shutdown")
        shutil.rmtree(work, ignore_errors=True)
    if len(ratios) > 1:
        print_medians({"guard/url": ratios}, lambda name: f"ratio {name}")
    return 0


def real(args: argparse.Namespace) -> int:
    """The real vLLM, a load of our own, and url, profile and floor side by side."""
    if not (os.environ.get("VRAMTOP_VLLM_PYTHON") and os.environ.get("VRAMTOP_TINY_MODEL")):
        print("--real needs VRAMTOP_VLLM_PYTHON and VRAMTOP_TINY_MODEL (.ci/setup-vllm)")
        return 2

    home = tempfile.mkdtemp(prefix="vramtop-bench-")
    os.environ["VRAMTOP_HOME"] = home
    from bench.bench_restart_under_load import Streams, running_requests
    from tests.e2e.conftest import vllm_argv, vllm_env
    from vramtop.config import profile_from_argv
    from vramtop.ports import free_port
    from vramtop.profiles import save_profile
    from vramtop.supervisor import Supervisor

    profile = profile_from_argv(
        REAL_PROFILE, vllm_argv(free_port()), env=vllm_env("bench-console"), stop_timeout_s=15
    )
    save_profile(profile)
    sup = Supervisor(profile)
    print("starting the real vLLM (a minute or more) ...", flush=True)
    started = sup.start(timeout_s=600)
    if not started.ok:
        print(f"the server did not start: {started.message}")
        return 1
    ratios: dict[str, list[float]] = {k: [] for k in ("url", "profile")}
    beside: dict[str, list[float]] = {}
    # vllmstat, when this Python has it, beside them (it is no dependency of vramtop's).
    vllmstat = importlib.util.find_spec("vllmstat") is not None
    if not vllmstat:
        print("vllmstat is not installed here: measured without it")
    try:
        load = Streams(profile.url, args.streams).start()
        deadline = time.monotonic() + 60
        while running_requests(profile.url) < 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        for run in range(1, args.repeat + 1):
            if args.repeat > 1:
                print(f"run {run} of {args.repeat}")
            chunks = load.chunks
            results = measure(
                ["floor", "url", "profile", *(["vllmstat"] if vllmstat else [])],
                args.seconds,
                args.size,
                args.settle,
                real_home=home,
                baseline=args.baseline,
            )
            wall = results["url"]["wall_s"] + args.settle
            print(f"load: {args.streams} streams, ~{(load.chunks - chunks) / wall:.0f} chunks/s")
            for kind, ratio in report(results).items():
                ratios.setdefault(kind, []).append(ratio)
            for name, ratio in report_baseline(results).items():
                beside.setdefault(name, []).append(ratio)
        load.stop.set()
    finally:
        sup.stop()
        shutil.rmtree(home, ignore_errors=True)
    if args.repeat > 1:
        print_medians(ratios, lambda kind: f"ratio {kind if '/' in kind else f'{kind}/floor'}")
        print_medians(beside, str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
