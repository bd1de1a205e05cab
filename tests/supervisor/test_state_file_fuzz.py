"""Any state file, however damaged or hostile, is read without a crash and never makes a
status, a housekeeping step or a stop signal a process that is not the server (hypothesis)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from supervisor_helpers import fake_profile

from tests.support.examples import examples
from tests.support.ports import free_port
from vramtop.supervisor import state
from vramtop.supervisor.service import Supervisor


@pytest.fixture(scope="module")
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
    )
    yield proc
    proc.kill()
    proc.wait()


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _records(bystander_pid: int, created: float) -> st.SearchStrategy[object]:
    """Records that mix real-looking fields (the bystander's pid, start and group) with any
    JSON in any field."""
    pid = st.sampled_from([bystander_pid, 0, -1, 1, 2**31, 2**70]) | _JSON
    fields = {
        "profile": st.just("fuzz") | _JSON,
        "state": st.sampled_from(["running", "starting", "stopping", "crashed", "stopped", "x"])
        | _JSON,
        "pid": pid,
        "pgid": pid,
        "create_time": st.sampled_from([created, 0.0, -1.0]) | _JSON,
        "tree": st.dictionaries(st.sampled_from([str(bystander_pid), "1", "x", "-3"]), _JSON)
        | _JSON,
        "launch_id": st.sampled_from([None, "id"]) | _JSON,
        "argv": st.lists(st.text(max_size=5), max_size=3) | _JSON,
        "port": st.integers() | _JSON,
        "started_by": st.sampled_from(["vramtop", "attached"]) | _JSON,
        "actor_pid": pid,
        "flag_overrides": _JSON,
        "log_offset": _JSON,
    }
    return st.fixed_dictionaries({}, optional=fields) | _JSON


@settings(
    max_examples=examples(120),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_state_file_is_read_and_never_signals_a_bystander(
    data: st.DataObject, home: Path, ledger: Path, bystander: subprocess.Popen[bytes]
) -> None:
    created = psutil.Process(bystander.pid).create_time()
    record = data.draw(_records(bystander.pid, created))
    path = state.state_path("fuzz")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(json.dumps(record, allow_nan=True))
    os.chmod(path, 0o600)
    sup = Supervisor(fake_profile("fuzz", free_port(), ledger))
    sup.status()
    sup.housekeeping()
    sup.stop()
    assert bystander.poll() is None, record
