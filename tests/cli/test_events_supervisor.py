"""The supervisor writes each action to the lasting timeline once it has answered, with who
asked and what came of it (real processes: the fake vLLM of the supervisor tests); `vramtop
events` then shows them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.supervisor.supervisor_helpers import fake_profile
from tests.support.ports import free_port
from vramtop import cli
from vramtop.core.remedy import FlagChange, RelaunchOrder
from vramtop.event_log import EventLog
from vramtop.outcomes import Outcome
from vramtop.supervisor import Supervisor
from vramtop.supervisor.action_events import ActionDone


@pytest.fixture
def supervisor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Supervisor]:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    sup = Supervisor(fake_profile("ev", free_port(), ledger))
    yield sup
    sup.stop()


def test_actions_are_written_with_who_asked_and_their_result(
    supervisor: Supervisor, capsys: pytest.CaptureFixture[str]
) -> None:
    assert supervisor.start().ok
    assert supervisor.start().ok  # already running: nothing happened, no event
    relaunched = supervisor.relaunch(RelaunchOrder(FlagChange(0.8)), asked_by="guard")
    assert relaunched.ok, relaunched.message
    refused = supervisor.relaunch(
        RelaunchOrder(FlagChange(0.7), precheck=lambda changes: "vLLM would refuse it")
    )
    assert not refused.ok  # refused before the stop: the server is as it was, no event
    assert supervisor.stop(asked_by="key").ok
    events = EventLog.for_profile("ev").read()
    assert [(e.name, e.detail["asked_by"], e.detail["result"]) for e in events] == [
        ("start", "command", "ok"),
        ("relaunch", "guard", "ok"),
        ("stop", "key", "ok"),
    ]
    assert events[1].detail["gpu_memory_utilization"] == 0.8
    assert "sekrit-key-123" not in EventLog.for_profile("ev").path.read_text()
    assert cli.main(["events", "--profile", "ev", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["events"]
    assert [e["event"] for e in shown] == ["start", "relaunch", "stop"]


def test_a_relaunch_that_went_back_is_written_as_rolled_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    # The fake vLLM refuses a budget above what is free, in vLLM's words.
    sup = Supervisor(fake_profile("rb", free_port(), ledger, util=0.8, FAKE_FREE_FRACTION="0.85"))
    try:
        assert sup.start().ok
        result = sup.relaunch(RelaunchOrder(FlagChange(0.95)), asked_by="key")
        assert not result.ok and result.rolled_back, result.message
    finally:
        sup.stop()
    relaunch = next(e for e in EventLog.for_profile("rb").read() if e.name == "relaunch")
    assert relaunch.detail["result"] == "rolled_back"
    assert relaunch.detail["gpu_memory_utilization"] == 0.95
    assert relaunch.detail["asked_by"] == "key"
    assert "serve again" in str(relaunch.detail["message"])


def test_an_actions_outcome_is_set_once_and_told_to_the_timeline_and_every_listener(
    supervisor: Supervisor,
) -> None:
    """One outcome per action, set where it ends: the result carries it, and the lasting
    timeline and a listener (a console's session) are told the same one, from one hook."""
    told: list[ActionDone] = []
    supervisor.tell_actions_to(told.append)
    assert supervisor.start().outcome is Outcome.OK
    relaunched = supervisor.relaunch(RelaunchOrder(FlagChange(0.8)))
    refused = supervisor.relaunch(
        RelaunchOrder(FlagChange(0.7), precheck=lambda change: "vLLM would refuse it")
    )
    assert relaunched.outcome is Outcome.OK and refused.outcome is Outcome.REFUSED
    assert [(d.name, d.outcome, d.changed) for d in told] == [
        ("start", Outcome.OK, True),
        ("relaunch", Outcome.OK, True),
        ("relaunch", Outcome.REFUSED, False),
    ]
    assert [d.result for d in told[1:]] == [relaunched, refused]
    written = [e.detail["result"] for e in EventLog.for_profile("ev").read()]
    assert written == [d.outcome.value for d in told if d.changed]
