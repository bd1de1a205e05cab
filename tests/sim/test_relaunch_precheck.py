"""A relaunch vLLM would refuse is refused before the old server is stopped: the console's
backend checks the new flags against vLLM's startup checks and the memory free now (real
processes on the simulated machine)."""

from __future__ import annotations

from pathlib import Path

import pytest
from supervised_sim import supervised

from tests.support.waiting import PROCESS_S, wait_until
from vramtop.core.model import GIB
from vramtop.core.remedy import FlagChange, RelaunchOrder
from vramtop.core.sample_facts import desktop_bytes
from vramtop.sim.machine import SimMachine


def test_flags_vllm_would_refuse_leave_the_server_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    with (
        SimMachine(tmp_path / "sim", speed=4.0, startup_s=0.2) as machine,
        supervised(machine, "pre") as served,  # 0.93 with 262,144 tokens
    ):
        backend, supervisor = served.backend, served.supervisor

        def ticked_until_known() -> bool:
            return backend.tick().headroom_inputs is not None

        wait_until(
            ticked_until_known, deadline_s=PROCESS_S, what="the headroom's inputs", poll_s=0.2
        )
        pid = supervisor.status().pid
        # 262,144 tokens do not fit in 0.85's pool: refused, in vLLM's words, before a stop.
        refused = backend.relaunch(RelaunchOrder(FlagChange(0.85)))
        assert not refused.ok and not refused.rolled_back
        assert "To serve at least one request with the model's max seq len (262144)" in (
            refused.message
        )
        assert supervisor.status().pid == pid
        assert not [e for e in backend.session.events() if e.name == "relaunch"]
        # More than is free beside the desktop: refused by vLLM's free-memory check.
        too_big = backend.relaunch(RelaunchOrder(FlagChange(0.99)))
        assert not too_big.ok and "Free memory on device" in too_big.message
        assert supervisor.status().pid == pid
        # The same budget with a ceiling that fits starts.
        ok = backend.relaunch(RelaunchOrder(FlagChange(0.85, max_model_len=163_840)))
        assert ok.ok, ok.message
        assert supervisor.status().pid != pid
        relaunches = [e for e in backend.session.events() if e.name == "relaunch"]
        assert [e.detail.get("result") for e in relaunches] == ["ok"]


def test_a_restart_the_call_leaves_no_room_for_is_refused_before_the_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console's restart (its r key, the banner's first remedy) while a call holds the
    memory the budget needs: vLLM's free-memory check would refuse the start, so the
    restart is refused before the stop and the server keeps serving; after the call it
    restarts."""
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    with (
        SimMachine(tmp_path / "sim", speed=4.0, startup_s=0.2) as machine,
        supervised(machine, "pre") as served,  # 0.93 with 262,144 tokens
    ):
        backend, supervisor = served.backend, served.supervisor
        pid = supervisor.status().pid

        def desktop() -> int | None:
            frame = backend.tick()
            return desktop_bytes(frame.sample) if frame.headroom_inputs is not None else None

        before = wait_until(desktop, deadline_s=PROCESS_S, what="the desktop's share", poll_s=0.2)

        def sampled(call: bool) -> bool:
            # The call's memory seen in what the console samples, or gone from it.
            now = desktop()
            return now is not None and (now > before + 2 * GIB if call else now <= before)

        machine.set_call(True)
        wait_until(lambda: sampled(True), deadline_s=PROCESS_S, what="the call seen", poll_s=0.2)
        refused = backend.restart()
        assert not refused.ok
        assert refused.message.startswith("not restarted (the server keeps serving)")
        assert "Free memory on device" in refused.message
        assert supervisor.status().pid == pid
        assert not [e for e in backend.session.events() if e.name == "restart"]

        machine.set_call(False)
        wait_until(lambda: sampled(False), deadline_s=PROCESS_S, what="the call gone", poll_s=0.2)
        restarted = backend.restart()
        assert restarted.ok, restarted.message
        assert supervisor.status().pid != pid


def test_a_console_opened_during_the_call_still_refuses_the_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console's first sample is already the call's: what the desktop held when the
    server started is read from vLLM's own startup line (the memory free at its check)."""
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    with (
        SimMachine(tmp_path / "sim", speed=4.0, startup_s=0.2) as machine,
        supervised(machine, "late") as served,  # 0.93; not sampled yet
    ):
        backend, supervisor = served.backend, served.supervisor
        pid = supervisor.status().pid
        machine.set_call(True)
        # The whole call's memory taken before the console's first sample.
        wait_until(
            lambda: machine.state()["call_level"] >= 1.0,
            deadline_s=PROCESS_S,
            what="the call's memory all taken",
            poll_s=0.2,
        )

        def in_the_call() -> bool:
            frame = backend.tick()
            desktop = desktop_bytes(frame.sample)
            return frame.headroom_inputs is not None and desktop is not None and desktop > 3 * GIB

        wait_until(in_the_call, deadline_s=PROCESS_S, what="the call seen", poll_s=0.2)
        refused = backend.restart()
        assert not refused.ok
        assert refused.message.startswith("not restarted (the server keeps serving)")
        assert supervisor.status().pid == pid
