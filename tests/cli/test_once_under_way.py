"""`vramtop --once` says an action under way on the profile's server from another process (a
real one here, holding the profile's action lock as `vramtop restart` does) as `status` says it:
`under_way` in its JSON, the action's own word before the server's state in its text."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.acting_elsewhere import acting_elsewhere
from tests.support.ports import free_port
from vramtop.outcomes import ExitCode


def _once(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "vramtop", "--once", "--interval", "0.2", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
    )
    assert done.returncode == ExitCode.NOT_SERVING, done.stderr  # nothing serves meanwhile
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.mark.slow
def test_once_says_a_restart_under_way_from_another_terminal(private_home: Path) -> None:
    from vramtop.config import Profile
    from vramtop.profiles import save_profile

    save_profile(Profile(name="busy", argv=["vllm", "serve", "m"], port=free_port()))
    env = {**os.environ, "VRAMTOP_HOME": str(private_home)}
    with acting_elsewhere("busy", env=env) as other:
        data = json.loads(_once(env, "--json").stdout)
        assert data["server"]["state"] == "stopped"  # the record's, as before
        acting = data["under_way"]
        assert (acting["action"], acting["state_word"], acting["pid"]) == (
            "restart",
            "restarting",
            other.pid,
        )
        assert isinstance(acting["seconds"], float)
        assert acting["asked_by"] == "command"
        text = _once(env).stdout
        said = r": restarting, \d+ s so far, by a command · the server is stopped"
        assert re.search(said, text), text
    assert json.loads(_once(env, "--json").stdout)["under_way"] is None  # done
    assert "restarting" not in _once(env).stdout
