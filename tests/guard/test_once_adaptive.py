"""`--once --json`'s `adaptive` object: present while an adaptive guard holds the profile's
actor lock, absent otherwise (a real --once on the simulated machine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HOLD = textwrap.dedent(
    """
    import sys
    from vramtop.supervisor.actor import ActorLock, write_guard_state
    lock = ActorLock("demo", "guard")
    assert lock.try_acquire()
    write_guard_state("demo", outside=0.93, during=0.83, down=1796170000.0, up=None)
    print("held", flush=True)
    sys.stdin.readline()
    """
)


def once(env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "vramtop", "--demo", "--once", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode in (0, 6), done.stderr
    data = json.loads(done.stdout)
    assert isinstance(data, dict)
    return data


@pytest.mark.slow
def test_once_json_shows_the_adaptive_guards_budgets_only_while_it_runs(tmp_path: Path) -> None:
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
        assert once(env)["adaptive"] == {
            "outside": 0.93,
            "during": 0.83,
            "down": 1796170000.0,
            "up": None,
        }
    finally:
        assert guard.stdin is not None
        guard.stdin.close()
        guard.wait(10)
        subprocess.run(
            [sys.executable, "-m", "vramtop", "stop", "--demo"], env=env, capture_output=True
        )
    assert "adaptive" not in once(env)  # no guard holds the lock now
    subprocess.run(
        [sys.executable, "-m", "vramtop", "stop", "--demo"], env=env, capture_output=True
    )
