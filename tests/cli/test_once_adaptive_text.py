"""`--once`'s text says an adaptive guard's budgets in the throughput panel's words while the
guard holds the profile's actor lock, and nothing of them otherwise (a real --once on the
simulated machine, a real process holding the lock)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

DOWN = 1796170000.0
HOLD = textwrap.dedent(
    f"""
    import sys
    from vramtop.supervisor.actor import ActorLock, write_guard_state
    lock = ActorLock("demo", "guard")
    assert lock.try_acquire()
    write_guard_state("demo", outside=0.93, during=0.83, down={DOWN!r}, up=None)
    print("held", flush=True)
    sys.stdin.readline()
    """
)


def once_text(env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "vramtop", "--demo", "--once"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode in (0, 6), done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


@pytest.mark.slow
def test_once_text_says_the_budgets_only_while_an_adaptive_guard_runs(tmp_path: Path) -> None:
    env = {**os.environ, "VRAMTOP_HOME": str(tmp_path), "VRAMTOP_SIM_STARTUP_S": "0.3"}
    guard = subprocess.Popen(
        [sys.executable, "-c", HOLD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert guard.stdout is not None and guard.stdout.readline().strip() == "held"
        text = once_text(env)
        down = time.strftime("%H:%M", time.localtime(DOWN))
        line = (
            f"budget: 0.93 outside calls, 0.83 during; down {down}, up when the desktop has settled"
        )
        assert line in text.splitlines(), text
    finally:
        assert guard.stdin is not None
        guard.stdin.close()
        guard.wait(10)
    try:
        text = once_text(env)
        assert "generation" in text and "budget:" not in text, text  # no guard holds the lock
    finally:
        subprocess.run(
            [sys.executable, "-m", "vramtop", "stop", "--demo"], env=env, capture_output=True
        )
