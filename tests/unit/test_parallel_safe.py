"""The suite runs in parallel (pytest-xdist): no test shares vramtop's files with another, nor
with the person running it."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ports
from vramtop import locations
from vramtop import ports as product_ports
from vramtop.ports import ephemeral_floor

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


def test_the_ports_a_test_is_given_are_its_own_and_below_the_ephemeral_range() -> None:
    # Chosen from the ephemeral range, a port could be taken by any test's outgoing
    # connection before its server binds it ("Address already in use" from a real vLLM
    # 20 s later); given twice in a run, a reader of one test could ask another's server.
    given = [ports.free_port() for _ in range(50)]
    assert len(set(given)) == len(given)
    assert all(ports.LOW <= port < ephemeral_floor() for port in given), given
    assert all(port in ports.claimed() for port in given)


def test_a_slice_held_by_one_process_is_not_claimed_by_another(tmp_path: Path) -> None:
    # Two runs of the suite side by side have workers of the same names: the lock decides.
    first = ports.claim_slice(3, tmp_path)
    assert first is not None and first[0] == 3
    second = ports.claim_slice(3, tmp_path)  # another open file: flock sees a second holder
    assert second is not None and second[0] == 4
    os.close(first[1])
    again = ports.claim_slice(3, tmp_path)  # given back when its holder closes it
    assert again is not None and again[0] == 3
    os.close(second[1])
    os.close(again[1])


def test_a_slice_whose_lock_file_is_a_link_is_not_claimed(tmp_path: Path) -> None:
    target = tmp_path / "someone-elses-file"
    target.write_text("kept\n")
    (tmp_path / "vramtop-test-ports-5.lock").symlink_to(target)
    held = ports.claim_slice(5, tmp_path)
    assert held is not None and held[0] == 6  # the link was not followed, nor its slice taken
    os.close(held[1])
    assert target.read_text() == "kept\n"


def test_the_slices_do_not_overlap_and_stay_below_the_ephemeral_range() -> None:
    slices = [set(ports.slice_range(n)) for n in range(ports.SLICES)]
    assert all(len(s) >= 100 for s in slices)
    assert all(not (a & b) for i, a in enumerate(slices) for b in slices[i + 1 :])
    assert max(max(s) for s in slices) < min(ports.HIGH, ephemeral_floor())


def test_the_product_chooses_its_ports_below_the_ephemeral_range_and_apart_from_the_tests() -> None:
    chosen = {product_ports.free_port() for _ in range(20)}
    assert all(port < ephemeral_floor() for port in chosen), chosen
    assert not any(port in range(ports.LOW, ports.HIGH) for port in chosen), chosen


def _chooses_a_port_itself(source: str) -> bool:
    """Whether the source binds a socket to port 0 and returns the port from inside the
    `with` that closes the socket: the port handed on, free for anyone until bound again."""
    for block in ast.walk(ast.parse(source)):
        if not isinstance(block, ast.With):
            continue
        inner = list(ast.walk(ast.Module(body=block.body, type_ignores=[])))
        binds_zero = any(
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "bind"
            and node.args
            and isinstance(node.args[0], ast.Tuple)
            and isinstance(node.args[0].elts[-1], ast.Constant)
            and node.args[0].elts[-1].value == 0
            for node in inner
        )
        returns_port = any(
            isinstance(node, ast.Return) and "getsockname" in ast.unparse(node) for node in inner
        )
        if binds_zero and returns_port:
            return True
    return False


def test_no_test_module_chooses_a_port_by_binding_to_zero_and_handing_it_on() -> None:
    # A port handed on is bound later, by another process: it comes from tests/support/ports.
    offenders = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if path.name != "ports.py" and _chooses_a_port_itself(path.read_text())
    ]
    assert offenders == []


def test_the_rule_above_sees_a_planted_port_chooser() -> None:
    planted = (
        "def pick():\n    with socket.socket() as s:\n"
        '        s.bind(("127.0.0.1", 0))\n        return s.getsockname()[1]\n'
    )
    assert _chooses_a_port_itself(planted)
