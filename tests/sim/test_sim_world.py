"""The world daemon as a real process: protocol, reaping, calls with a speed factor, probes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.support.waiting import PROCESS_S, wait_until
from vramtop.sim.card import GIB
from vramtop.sim.gpu_probe import SimGpuProbe
from vramtop.sim.world import pid_alive
from vramtop.sim.world_protocol import WorldClient


def eventually(check: Any, timeout_s: float = PROCESS_S) -> Any:
    return wait_until(check, deadline_s=timeout_s, what="the check (see the line above)")


def test_state_alloc_free_over_the_socket(machine: Any) -> None:
    c = machine.client
    st = c.request("state")
    assert st["device"]["name"] == "NVIDIA GeForce RTX 5090"
    assert st["device"]["total_bytes"] == 32_607 * 1024**2
    assert st["call_on"] is False and st["scenario"] == "manual"
    pid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert c.request("alloc", pid=pid.pid, name="holder", bytes=4 * GIB)["ok"]
        refused = c.request("alloc", pid=pid.pid, name="holder", bytes=40 * GIB)
        assert refused["ok"] is False and refused["free_bytes"] < 40 * GIB
        held = {p["pid"]: p["used_bytes"] for p in c.request("state")["processes"]}
        assert held[pid.pid] == 4 * GIB
        # The driver frees a process's memory when it exits: the world reaps dead pids.
        pid.kill()
        pid.wait()
        assert eventually(lambda: not c.request("state")["servers"])
    finally:
        pid.kill()
        pid.wait()
    assert c.request("free", pid=12345)["freed_bytes"] == 0
    assert c.request("nonsense")["ok"] is False


def test_a_call_grows_the_desktop_faster_with_a_speed_factor(machine_factory: Any) -> None:
    m = machine_factory(speed=20.0)  # the call ramps up in a fraction of a second
    idle = m.state()["desktop_bytes"]
    m.set_call(True)
    assert m.call_on()
    assert eventually(lambda: m.state()["call_level"] >= 1.0)
    assert m.state()["desktop_bytes"] - idle > 2 * GIB
    m.set_call(False)
    assert not m.call_on()
    assert eventually(lambda: m.state()["call_level"] == 0.0)


def test_probe_linux_way_lists_processes_wsl_way_does_not(machine_factory: Any) -> None:
    linux = machine_factory().probe().read()
    assert linux.available and linux.source == "sim"
    dev = linux.devices[0]
    assert dev.processes is not None and {p.name for p in dev.processes} >= {"gnome-shell"}
    assert dev.used_bytes + dev.free_bytes == dev.total_bytes
    wsl = machine_factory(wsl=True).probe().read()
    assert wsl.available and wsl.devices[0].processes is None


def test_probe_never_raises_when_the_world_is_gone(tmp_path: Path) -> None:
    probe = SimGpuProbe(tmp_path / "missing.sock")
    probe.call_on = True  # as if a call had been on before the simulated machine went
    reading = probe.read()
    assert not reading.available
    assert reading.error is not None and reading.error.startswith("simulated GPU not reachable")
    assert probe.call_on is False  # no machine, no call on it


def test_probe_carries_the_call_state_of_the_same_read(machine_factory: Any) -> None:
    # The demo's header shows a call from the tick's GPU read, without a second request.
    m = machine_factory()
    probe = m.probe()
    probe.read()
    assert probe.call_on is False
    m.set_call(True)
    assert probe.call_on is False  # not asked again until the next read
    probe.read()
    assert probe.call_on is True
    m.set_call(False)
    probe.read()
    assert probe.call_on is False


def test_world_rejects_an_unknown_scenario(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "vramtop.sim.world", "--socket", str(tmp_path / "s"),
         "--scenario", "nope"],
        capture_output=True, text=True, timeout=20,
    )  # fmt: skip
    assert out.returncode == 2 and "bundled ones" in out.stderr


def test_world_survives_clients_that_send_garbage(machine: Any) -> None:
    import socket

    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(machine.socket_path))
        s.sendall(b"not json\n")
        assert b'"ok": false' in s.recv(4096)
    assert WorldClient(machine.socket_path).request("ping")["ok"]


def _one_answer_server(path: Path, answer: bytes, delay_s: float = 0.0) -> Any:
    """A daemon at `path` that answers one request with `answer`, `delay_s` after reading it."""
    import socket
    import threading
    import time

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            time.sleep(delay_s)  # not a wait: a daemon slow to answer is what some tests ask
            conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


def test_an_answer_that_is_not_utf8_is_unreachable_not_a_crash(tmp_path: Path) -> None:
    from vramtop.sim.world_protocol import WorldUnreachable

    path = tmp_path / "bad.sock"
    listener, thread = _one_answer_server(path, b'{"ok": "\xff"}\n')
    try:
        try:
            WorldClient(path, timeout_s=2.0).request("state")
        except WorldUnreachable as exc:
            assert "unreadable" in str(exc)
        else:
            raise AssertionError("a garbled answer was accepted")
    finally:
        thread.join(2.0)
        listener.close()


def test_probe_reads_an_infinite_number_as_an_unreadable_state(tmp_path: Path) -> None:
    path = tmp_path / "inf.sock"
    state = (
        b'{"device": {"index": 0, "name": "x", "total_bytes": Infinity, "used_bytes": 0,'
        b' "free_bytes": 0, "temperature_c": 0, "sm_clock_mhz": 0, "throttle": []},'
        b' "processes": []}\n'
    )
    listener, thread = _one_answer_server(path, state)
    try:
        reading = SimGpuProbe(path).read()
        assert reading.devices == () and "unreadable" in (reading.error or "")
    finally:
        thread.join(2.0)
        listener.close()


def test_a_scenario_file_that_is_not_an_object_is_a_clear_error(tmp_path: Path) -> None:
    import pytest

    from vramtop.sim import scenario

    bad = tmp_path / "list.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not valid"):
        scenario.load(bad)


def test_simulated_windows_side_never_raises_on_an_odd_state(tmp_path: Path) -> None:
    from vramtop.sim.windows_side import SimWindowsSource

    path = tmp_path / "odd.sock"
    listener, thread = _one_answer_server(path, b'{"ok": true, "servers": [{"no_pid": 1}]}\n')
    try:
        reading = SimWindowsSource(path).read()
        assert not reading.available and "unreadable" in (reading.error or "")
    finally:
        thread.join(2.0)
        listener.close()


def test_a_process_holds_simulated_memory_while_it_runs() -> None:
    assert pid_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    wait_until(
        lambda: psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE,
        deadline_s=PROCESS_S,
        what="the child ended, not yet reaped",
    )
    assert not pid_alive(child.pid)  # a zombie holds no memory
    child.wait()
    assert not pid_alive(child.pid)  # gone


@pytest.mark.slow
def test_a_slow_world_is_waited_for_by_the_simulated_server_not_left(tmp_path: Path) -> None:
    # On a loaded machine the world daemon can take seconds to answer; the simulated vLLM's
    # start asked it with a 2 s limit and exited ("gpu.sock: timed out"), where a real vLLM
    # waits on its GPU. A daemon that is gone still fails at once (no socket).
    from vramtop.sim.world_protocol import WorldUnreachable

    path = tmp_path / "slow.sock"
    listener, thread = _one_answer_server(path, b'{"ok": true, "t": 0}\n', delay_s=3.0)
    try:
        assert WorldClient(path).request("ping")["ok"] is True
    finally:
        thread.join(10.0)
        listener.close()
    try:
        WorldClient(tmp_path / "gone.sock").request("ping")
    except WorldUnreachable as exc:
        assert "gone.sock" in str(exc)
    else:
        raise AssertionError("a missing daemon was answered")
