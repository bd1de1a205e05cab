"""The guard's watch and the others of its profile: a key or command in another process wins
over the pending automatic relaunch (cancelled, said as a guard event and news), and the
findings a console recorded open before the guard took over are not told again."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.guard.test_guard_policy import collapse, sample
from vramtop.commands.guard import GuardSettings
from vramtop.commands.guard_watch import Watch
from vramtop.core.guard.decisions import ACTED, CANCELLED, WAITED
from vramtop.core.model import DoorReading
from vramtop.core.news import News
from vramtop.core.remedy import FlagChange
from vramtop.event_log import EventLog
from vramtop.machines.interface import Frame
from vramtop.machines.runner import Step
from vramtop.outcomes import ActionResult


class Backend:
    """What the watch asks of a machine, for a profile with no supervisor of its own here."""

    profile_name = "p"
    profile_argv: tuple[str, ...] = ()
    session = None
    autostart = False
    demo = False

    def server_state(self) -> None:
        return None

    def outside_budget_bytes(self) -> int | None:
        return None

    def housekeeping(self) -> None:
        pass

    def keep_house(self) -> None:
        pass


class Notifier:
    names = ("test",)
    reach = "test"

    def __init__(self) -> None:
        self.sent: list[News] = []

    def send(self, news: News) -> None:
        self.sent.append(news)

    def close(self) -> None:
        pass


@pytest.fixture
def timeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EventLog:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path))
    return EventLog.for_profile("p")


def watch_of(timeline: EventLog, notifier: Notifier) -> Watch:
    settings = GuardSettings(None, None, auto_remedy=True, adaptive=False, settle_s=300.0)
    return Watch(Backend(), notifier, settings, timeline)  # type: ignore[arg-type]


def another_process_appends(event: str, detail: dict[str, Any]) -> None:
    """What a console's key or a `vramtop relaunch` writes, from its own process."""
    code = textwrap.dedent(
        f"""
        import time
        from vramtop.event_log import EventLog
        EventLog.for_profile("p").append(time.time(), {event!r}, {detail!r})
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_key_in_another_process_cancels_the_pending_relaunch(timeline: EventLog) -> None:
    notifier = Notifier()
    watch = watch_of(timeline, notifier)
    found = collapse()
    watch.on_step(Step(Frame(sample(10.0, running=2), (found,)), opened=(found,)))
    watch.on_step(Step(Frame(sample(20.0, running=2), (found,))))
    decisions = [e.detail.get("decision") for e in timeline.read() if e.name == "guard"]
    assert decisions == [WAITED]  # pending: a request runs
    # The guard's own relaunch, written as asked by the guard, is no person's.
    another_process_appends("relaunch", {"result": "ok", "asked_by": "guard"})
    watch.on_step(Step(Frame(sample(21.0, running=2), (found,))))
    assert watch.policy.pending() is not None
    another_process_appends("relaunch", {"result": "ok", "asked_by": "key"})
    watch.on_step(Step(Frame(sample(22.0, running=2), (found,))))
    assert watch.policy.pending() is None
    guard = [e.detail for e in timeline.read() if e.name == "guard"]
    assert [d["decision"] for d in guard] == [WAITED, CANCELLED]
    assert "a relaunch (key) was asked" in str(guard[-1]["why"])
    assert "cancelled" in notifier.sent[-1].title
    # Nothing acts afterwards, at the quiet moment it had waited for.
    watch.on_step(Step(Frame(sample(23.0, running=0), (found,))))
    assert [e.detail["decision"] for e in timeline.read() if e.name == "guard"] == [
        WAITED,
        CANCELLED,
    ]


def test_the_door_the_sample_read_lets_the_relaunch_go_while_requests_run(
    timeline: EventLog,
) -> None:
    """The front door as this step's sample read it (the sampler asks it each tick): one
    that holds the agent's next request lets the relaunch begin with requests running."""
    relaunched: list[dict[str, object]] = []

    class Behind(Backend):
        def events(self) -> list[object]:
            return []

        def relaunch(self, change: FlagChange) -> ActionResult:
            relaunched.append(change.to_json())
            return ActionResult(True, "relaunched")

    settings = GuardSettings(None, None, auto_remedy=True, adaptive=False, settle_s=300.0)
    watch = Watch(Behind(), Notifier(), settings, timeline)  # type: ignore[arg-type]
    found = collapse()
    door = DoorReading(address="127.0.0.1:8000", in_flight=1)
    watch.on_step(Step(Frame(sample(10.0, running=2), (found,)), opened=(found,)))
    watch.on_step(Step(Frame(replace(sample(20.0, running=2), door=door), (found,))))
    guard = [e.detail for e in timeline.read() if e.name == "guard"]
    # Pending from that sample (2 running), and let go by the door the same sample read.
    assert [d["decision"] for d in guard] == [WAITED, ACTED]
    assert "lets the 1 in flight finish" in str(guard[1]["why"])
    assert watch._action is not None
    watch._action.join(10)
    assert relaunched == [{"gpu_memory_utilization": 0.85, "max_model_len": 163_840}]


def test_waiting_is_in_the_timeline_but_is_not_news(timeline: EventLog) -> None:
    """A pending relaunch waits for a moment between turns: said in the timeline, not sent
    to the person (who hears when it begins, or that it was skipped)."""
    notifier = Notifier()
    watch = watch_of(timeline, notifier)
    found = collapse()
    watch.on_step(Step(Frame(sample(10.0, running=2), (found,)), opened=(found,)))
    watch.on_step(Step(Frame(sample(20.0, running=2), (found,))))
    assert [e.detail.get("decision") for e in timeline.read() if e.name == "guard"] == [WAITED]
    assert [n.change for n in notifier.sent] == ["opened"]  # the finding's news, no more


def test_a_finding_the_console_recorded_open_is_not_told_again(timeline: EventLog) -> None:
    # The console acted, then handed over with the collapse open in the lasting timeline.
    another_process_appends(
        "finding", {"kind": "vram_contention", "change": "opened", "summary": "s", "id": "x"}
    )
    notifier = Notifier()
    watch = watch_of(timeline, notifier)
    watch.begin()
    found = collapse()
    watch.on_step(Step(Frame(sample(10.0), (found,)), opened=(found,)))
    assert [n.change for n in notifier.sent] == []  # told by the console already
    findings = [e.detail["change"] for e in timeline.read() if e.name == "finding"]
    assert findings == ["opened"]  # the console's, once
    # Its closing is the guard's to tell, once.
    closed = replace(found, closed_t=30.0)
    watch.on_step(Step(Frame(sample(30.0)), closed=(closed,)))
    assert [n.change for n in notifier.sent] == ["closed"]
    assert [e.detail["change"] for e in timeline.read() if e.name == "finding"] == [
        "opened",
        "closed",
    ]
    # The next collapse is new: told and written.
    again = collapse(first_seen=40.0)
    watch.on_step(Step(Frame(sample(41.0), (again,)), opened=(again,)))
    assert [n.change for n in notifier.sent] == ["closed", "opened"]


def test_a_guard_whose_every_sample_fails_leaves_with_a_reason(
    timeline: EventLog, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ten failed samples in a row: exit 1 with the last error in words (systemd begins
    afresh), never a traceback on the way out; a key in the error is masked."""
    import threading

    from vramtop.commands.guard_watch import guard_loop
    from vramtop.machines.runner import MAX_FAILURES

    class Broken(Backend):
        demo = False
        asked_by = "command"

        def tick(self, log_limit: int = 0) -> Frame:
            raise RuntimeError("the probe broke (--api-key sk-secret-999)")

        def close(self, stop_server: bool) -> None:
            assert not stop_server  # vLLM keeps serving

    settings = GuardSettings(None, None, auto_remedy=False, adaptive=False, settle_s=300.0)
    code = guard_loop(Broken(), Notifier(), settings, 0.01, threading.Event())  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert code == 1
    assert f"{MAX_FAILURES} samples in a row failed (the last: the probe broke" in err
    assert "sk-secret-999" not in err
