"""The test suite's two loops, timed as a developer and CI run them: the fast loop
(`pytest -m "not slow and not e2e"`, after each change) and the README's full command (what
CI runs, the real-vLLM tests included where they are set up).

Each runs as a fresh `python -m pytest` from the repository root; printed per run: its wall
time, how many tests it collected and how they ended, and the ratio of the wall time to its
target (3 minutes for the fast loop, 10 for the full command), a ratio above 1 missing it;
under a fast loop, its five longest tests (one phase each, pytest's `--durations`), those past
2.5 s flagged: the longest process tests are marked `slow` and left to the full command.

`--busy N` runs N Python busy loops beside it (a machine whose cores other work keeps busy:
the suite must still pass, only slower); `--runs` repeats each command (the flakiness check:
5 runs in a row under `--busy 2`). `--seed S` (repeatable) runs each command once per seed in
pytest-randomly's order (`pip install -e '.[dev]'` installs it); without a seed the order is
the files' own, as in CI. `--workers` is pytest-xdist's `-n` (`auto`: two per core, as
tests/conftest.py sets it; `0`: no xdist). `--select` runs only the given test paths (a smoke
run of the bench itself).

    python -m bench.bench_suite [--only fast,full] [--runs 1] [--busy 0] [--seed S ...]
                                [--workers auto] [--select tests/unit/test_budget.py ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS_S = {"fast": 180.0, "full": 600.0}
FAST_MARKERS = "not slow and not e2e"
# pytest's closing line: "1 failed, 1,400 passed, 18 skipped, 3 deselected in 142.31s".
OUTCOME = re.compile(r"(\d[\d,]*) (passed|failed|skipped|xfailed|xpassed|errors?|deselected)")
# pytest's --durations lines: "2.81s call     tests/frontdoor/test_x.py::test_y[case]".
DURATION = re.compile(r"^(\d+\.\d+)s (?:setup|call|teardown) +(\S+)$", re.M)
# The fast loop's longest tests are printed (a test past SLOW_S of one worker's time is a
# candidate for `slow`: the fast loop stays within its target as the suite grows).
LONGEST = 5
SLOW_S = 2.5


@dataclass(frozen=True)
class Run:
    loop: str
    seed: int | None
    wall_s: float
    returncode: int
    outcomes: dict[str, int]
    longest: tuple[tuple[float, str], ...] = ()

    @property
    def collected(self) -> int:
        """The tests that ran or were skipped (deselected ones are not counted)."""
        return sum(n for kind, n in self.outcomes.items() if kind != "deselected")


def has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def pytest_argv(loop: str, seed: int | None, workers: str, select: list[str]) -> list[str]:
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    if loop == "fast":
        argv += ["-m", FAST_MARKERS, f"--durations={3 * LONGEST}"]  # a test has 3 phases
    if workers != "0":
        argv += ["-n", workers]
    if seed is not None:
        # pytest-randomly is off unless asked for (pyproject's addopts): `-p` turns it on.
        argv += ["-p", "randomly", f"--randomly-seed={seed}"]
    return argv + select


def outcomes(output: str) -> dict[str, int]:
    """The counts of pytest's closing line, by outcome ("error" and "errors" as one)."""
    lines = [line for line in output.splitlines() if OUTCOME.search(line)]
    found: dict[str, int] = {}
    for count, kind in OUTCOME.findall(lines[-1] if lines else ""):
        key = "errors" if kind.startswith("error") else kind
        found[key] = found.get(key, 0) + int(count.replace(",", ""))
    return found


def run_once(argv: list[str], loop: str, seed: int | None, timeout_s: float) -> Run:
    start = time.monotonic()
    try:
        done = subprocess.run(
            argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, check=False
        )
        returncode, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        returncode = -1
        output = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
    wall = time.monotonic() - start
    if returncode != 0:
        print(output[-4000:], file=sys.stderr)
    return Run(loop, seed, wall, returncode, outcomes(output), longest(output))


def longest(output: str) -> tuple[tuple[float, str], ...]:
    """The tests pytest's --durations named, each with its longest phase, longest first."""
    took: dict[str, float] = {}
    for seconds, test in DURATION.findall(output):
        took[test] = max(took.get(test, 0.0), float(seconds))
    return tuple(sorted(((s, test) for test, s in took.items()), reverse=True)[:LONGEST])


def busy_loops(count: int) -> list[subprocess.Popen[bytes]]:
    """`count` processes that each keep one core busy until ended."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def report(run: Run) -> str:
    target = TARGETS_S[run.loop]
    ended = ", ".join(f"{n:,} {kind}" for kind, n in run.outcomes.items()) or "no summary"
    seed = f" seed {run.seed}" if run.seed is not None else ""
    verdict = "ok" if run.returncode == 0 else f"FAILED (exit {run.returncode})"
    line = (
        f"{run.loop:<4}{seed:<12} {run.wall_s:7.1f} s  {run.collected:5,} collected ({ended})"
        f"  {run.wall_s / target:4.2f} of the {target / 60:g} min target  {verdict}"
    )
    for took, test in run.longest:
        mark = f"  (over {SLOW_S:g} s: mark it slow?)" if took >= SLOW_S else ""
        line += f"\n    {took:5.2f} s  {test}{mark}"
    return line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", default="fast,full", help="fast, full or both")
    parser.add_argument("--runs", type=int, default=1, help="runs of each command")
    parser.add_argument("--busy", type=int, default=0, help="busy loops running beside")
    parser.add_argument("--seed", type=int, action="append", default=[], help="random order")
    parser.add_argument("--workers", default="auto" if has("xdist") else "0")
    parser.add_argument("--select", nargs="*", default=[], help="test paths (default: all)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="per run, in seconds")
    args = parser.parse_args()
    if args.workers != "0" and not has("xdist"):
        parser.error("--workers needs pytest-xdist: pip install -e '.[test]'")
    if args.seed and not has("pytest_randomly"):
        parser.error("--seed needs pytest-randomly: pip install -e '.[dev]'")
    loops = [loop for loop in args.only.split(",") if loop]
    if not loops or any(loop not in TARGETS_S for loop in loops):
        parser.error(f"--only: fast, full or both, not {args.only!r}")
    seeds: list[int | None] = [*args.seed] if args.seed else [None]
    print(
        f"{os.cpu_count()} cores, --workers {args.workers}, {args.busy} busy loops beside;"
        f" fast loop: -m {FAST_MARKERS!r}; full: the README's command"
    )
    runs: list[Run] = []
    busy = busy_loops(args.busy)
    try:
        for loop in loops:
            for seed in seeds:
                for _ in range(args.runs):
                    argv = pytest_argv(loop, seed, args.workers, args.select)
                    runs.append(run_once(argv, loop, seed, args.timeout))
                    print(report(runs[-1]), flush=True)
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    failed = [run for run in runs if run.returncode != 0]
    print(f"{len(runs) - len(failed)} of {len(runs)} runs passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
