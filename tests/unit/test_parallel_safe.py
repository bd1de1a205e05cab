"""The suite runs in parallel (pytest-xdist): no test shares vramtop's files with another, nor
with the person running it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vramtop import locations

ROOT = Path(__file__).resolve().parents[2]


def _dirs() -> list[Path]:
    return [locations.config_dir(), locations.state_dir(), locations.log_dir()]


def test_every_test_has_a_vramtop_home_of_its_own(tmp_path: Path) -> None:
    assert all(path.is_relative_to(tmp_path) for path in _dirs()), _dirs()


def test_without_vramtop_home_the_default_directories_are_the_tests_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A test of the default locations (VRAMTOP_HOME unset) still never reaches the real ones.
    monkeypatch.delenv("VRAMTOP_HOME")
    assert all(path.is_relative_to(tmp_path) for path in _dirs()), _dirs()


# Prints each collected test's xdist group (the mark xdist's `--dist loadgroup` reads).
GROUPS_PLUGIN = """
def pytest_collection_finish(session):
    for item in session.items:
        mark = item.get_closest_marker("xdist_group")
        print("GROUP", item.nodeid, mark.args[0] if mark else None)
"""


@pytest.mark.slow
def test_the_real_vllm_tests_run_on_one_worker_one_after_another(tmp_path: Path) -> None:
    # A module's tests share one real vLLM (a module-scoped fixture): on one worker it starts
    # once, as in a serial run; spread over workers it would start on each.
    (tmp_path / "groups_plugin.py").write_text(GROUPS_PLUGIN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "groups_plugin"]
    out = subprocess.run(
        [*argv, "-p", "no:cacheprovider", "tests/e2e"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    ).stdout
    groups: dict[str, set[str]] = {}
    for line in out.splitlines():
        if line.startswith("GROUP "):
            _, nodeid, group = line.split(" ")
            groups.setdefault(nodeid.split("::")[0], set()).add(group)
    assert len(groups) >= 4, out
    # One group for them all: one worker runs the real-vLLM tests one after another.
    assert {name for names in groups.values() for name in names} == {"e2e"}, groups


def test_the_parallel_run_keeps_groups_together(pytestconfig: pytest.Config) -> None:
    # Without `-n` it changes nothing; with it, the groups above are honoured. (Read from the
    # settings: on an xdist worker the option itself reads "no".)
    assert "--dist loadgroup" in " ".join(pytestconfig.getini("addopts"))


def test_auto_starts_two_workers_per_core(
    pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tests mostly wait: `-n auto` starts two workers per core, not one.
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    workers = pytestconfig.hook.pytest_xdist_auto_num_workers(config=pytestconfig)
    assert workers == 2 * len(os.sched_getaffinity(0))
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "3")
    assert pytestconfig.hook.pytest_xdist_auto_num_workers(config=pytestconfig) == 3
