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
from vramtop.core.guard.decisions import ACTED, CANCELLED, WAITED
from vramtop.core.model import DoorReading
from vramtop.core.news import News
from vramtop.core.remedy import RelaunchOrder
from vramtop.event_log import EventLog
from vramtop.guard.choices import GuardSettings
from vramtop.guard.watch import Watch
from vramtop.machines.headless_runner import TickNews
from vramtop.machines.interface import Frame
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

    def run_housekeeping(self) -> None:
        pass

    def close(self, stop_server: bool) -> None:
        assert not stop_server  # vLLM keeps serving


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
    watch.on_tick(TickNews(Frame(sample(10.0, running=2), (found,)), opened=(found,)))
    watch.on_tick(TickNews(Frame(sample(20.0, running=2), (found,))))
    decisions = [e.detail.get("decision") for e in timeline.read() if e.name == "guard"]
    assert decisions == [WAITED]  # pending: a request runs
    # The guard's own relaunch, written as asked by the guard, is no person's.
    another_process_appends("relaunch", {"result": "ok", "asked_by": "guard"})
    watch.on_tick(TickNews(Frame(sample(21.0, running=2), (found,))))
    assert watch.policy.pending() is not None
    another_process_appends("relaunch", {"result": "ok", "asked_by": "key"})
    watch.on_tick(TickNews(Frame(sample(22.0, running=2), (found,))))
    assert watch.policy.pending() is None
    guard = [e.detail for e in timeline.read() if e.name == "guard"]
    assert [d["decision"] for d in guard] == [WAITED, CANCELLED]
    assert "a relaunch (key) was asked" in str(guard[-1]["why"])
    assert "cancelled" in notifier.sent[-1].title
    # Nothing acts afterwards, at the quiet moment it had waited for.
    watch.on_tick(TickNews(Frame(sample(23.0, running=0), (found,))))
    assert [e.detail["decision"] for e in timeline.read() if e.name == "guard"] == [
        WAITED,
        CANCELLED,
    ]


def test_the_watch_stamps_what_it_writes_by_the_one_clock_it_is_given(
    timeline: EventLog,
) -> None:
    """The lasting timeline's findings and guard events are stamped by the wall clock the
    loop passes in, not by a clock of the watch's own."""
    wall = 1_234_567_890.0
    settings = GuardSettings(None, None, auto_remedy=True, adaptive=False, settle_s=300.0)
    watch = Watch(Backend(), Notifier(), settings, timeline, wall=lambda: wall)  # type: ignore[arg-type]
    found = collapse()
    watch.on_tick(TickNews(Frame(sample(10.0, running=2), (found,)), opened=(found,)))
    watch.on_tick(TickNews(Frame(sample(20.0, running=2), (found,))))
    written = timeline.read()
    assert [e.name for e in written] == ["finding", "guard"]
    assert {e.t for e in written} == {wall}


def test_the_door_the_sample_read_lets_the_relaunch_go_while_requests_run(
    timeline: EventLog,
) -> None:
    """The front door as this step's sample read it (the sampler asks it each tick): one
    that holds the agent's next request lets the relaunch begin with requests running."""
    relaunched: list[dict[str, object]] = []

    class Behind(Backend):
        def events(self) -> list[object]:
            return []

        def relaunch(self, order: RelaunchOrder) -> ActionResult:
            relaunched.append(order.change.to_json())
            return ActionResult(True, "relaunched")

    settings = GuardSettings(None, None, auto_remedy=True, adaptive=False, settle_s=300.0)
    watch = Watch(Behind(), Notifier(), settings, timeline)  # type: ignore[arg-type]
    found = collapse()
    door = DoorReading(address="127.0.0.1:8000", in_flight=1)
    watch.on_tick(TickNews(Frame(sample(10.0, running=2), (found,)), opened=(found,)))
    watch.on_tick(TickNews(Frame(replace(sample(20.0, running=2), door=door), (found,))))
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
    watch.on_tick(TickNews(Frame(sample(10.0, running=2), (found,)), opened=(found,)))
    watch.on_tick(TickNews(Frame(sample(20.0, running=2), (found,))))
    assert [e.detail.get("decision") for e in timeline.read() if e.name == "guard"] == [WAITED]
    assert [n.change for n in notifier.sent] == ["opened"]  # the finding's news, no more


def test_a_finding_the_console_recorded_open_is_not_told_again(timeline: EventLog) -> None:
    # The console acted, then handed over with the collapse open in the lasting timeline.
    another_process_appends(
        "finding",
        {
            "kind": "vram_contention",
            "change": "opened",
            "summary": "s",
            "id": "x",
            "told_by": "console",
        },
    )
    notifier = Notifier()
    watch = watch_of(timeline, notifier)
    watch.begin()
    found = collapse()
    watch.on_tick(TickNews(Frame(sample(10.0), (found,)), opened=(found,)))
    assert [n.change for n in notifier.sent] == []  # told by the console already
    findings = [e.detail["change"] for e in timeline.read() if e.name == "finding"]
    assert findings == ["opened"]  # the console's, once
    # Its closing is the guard's to tell, once.
    closed = replace(found, closed_t=30.0)
    watch.on_tick(TickNews(Frame(sample(30.0)), closed=(closed,)))
    assert [n.change for n in notifier.sent] == ["closed"]
    assert [e.detail["change"] for e in timeline.read() if e.name == "finding"] == [
        "opened",
        "closed",
    ]
    # The next collapse is new: told and written.
    again = collapse(first_seen=40.0)
    watch.on_tick(TickNews(Frame(sample(41.0), (again,)), opened=(again,)))
    assert [n.change for n in notifier.sent] == ["closed", "opened"]


@pytest.mark.parametrize(
    ("told_by", "started_later"),
    [("guard", False), (None, False), ("console", True)],
    ids=["an-earlier-guard", "an-older-vramtop", "a-console-before-this-server"],
)
def test_a_finding_open_when_the_guard_starts_that_no_console_told_now_is_told_once(
    timeline: EventLog,
    capsys: pytest.CaptureFixture[str],
    told_by: str | None,
    started_later: bool,
) -> None:
    """Open in the lasting timeline, but told by an earlier guard, by a vramtop that did not
    say who told it, or by a console while an earlier server ran: no person saw it now, so
    the guard tells it (its news, `--on-finding` among them) and writes its opening, once."""
    import time

    detail: dict[str, Any] = {"kind": "vram_contention", "change": "opened", "summary": "s"}
    if told_by is not None:
        detail["told_by"] = told_by
    timeline.append(time.time(), "finding", detail)
    # The server the guard finds started after that telling, or long before it.
    started_at = time.time() + 60.0 if started_later else 1000.0
    notifier = Notifier()
    watch = watch_of(timeline, notifier)
    watch.begin()
    found = collapse()
    watch.on_tick(TickNews(Frame(sample(10.0, started_at=started_at), (found,)), opened=(found,)))
    assert [n.change for n in notifier.sent] == ["opened"]
    findings = [e.detail for e in timeline.read() if e.name == "finding"]
    assert [(d["change"], d.get("told_by")) for d in findings] == [
        ("opened", told_by),
        ("opened", "guard"),
    ]
    assert "told it before the guard took over" not in capsys.readouterr().err
    watch.on_tick(TickNews(Frame(sample(11.0, started_at=started_at), (found,))))
    assert [n.change for n in notifier.sent] == ["opened"]  # once


def test_a_persons_key_is_said_by_the_guard_in_its_output_and_the_timeline(
    timeline: EventLog, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key in a console beside the guard acts (a person's key wins): with nothing pending,
    the guard says that a person acted, on its output and as a `guard` event; it is not news
    (the person did it). The guard's own actions are not a person's."""
    notifier = Notifier()
    watch = watch_of(timeline, notifier)
    another_process_appends("relaunch", {"result": "ok", "asked_by": "guard"})
    another_process_appends("restart", {"result": "ok", "asked_by": "key"})
    watch.on_tick(TickNews(Frame(sample(10.0, running=0))))
    guard = [e.detail for e in timeline.read() if e.name == "guard"]
    said = "a person acted: a restart by a key in a console: ok"
    assert guard == [{"decision": "noted", "why": said}]
    assert f"vramtop guard: noted: {said}" in capsys.readouterr().err
    assert notifier.sent == []
    # Said once: the next step reads nothing new.
    watch.on_tick(TickNews(Frame(sample(11.0, running=0))))
    assert len([e for e in timeline.read() if e.name == "guard"]) == 1


def test_the_guards_start_and_stop_are_timeline_events(timeline: EventLog) -> None:
    import threading

    from vramtop.guard.loop import GuardClock, guard_loop

    stop = threading.Event()
    settings = GuardSettings(None, None, auto_remedy=False, adaptive=False, settle_s=300.0)
    # Asked to stop before its first sample: it starts, then leaves at once.
    stop.set()
    clock = GuardClock(samples=lambda: 0.0, sleep=lambda seconds: None)
    code = guard_loop(Backend(), Notifier(), settings, 1.0, stop, clock)  # type: ignore[arg-type]
    assert code == 0
    guard = [e.detail for e in timeline.read() if e.name == "guard"]
    assert [(d["decision"], d["why"]) for d in guard] == [
        ("started", "guarding profile p (auto remedy off; adaptive off; notifying test)"),
        ("stopped", "asked to stop; vLLM keeps running"),
    ]


def test_a_guard_whose_every_sample_fails_leaves_with_a_reason(
    timeline: EventLog, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ten failed samples in a row: exit 1 with the last error in words (systemd begins
    afresh), never a traceback on the way out; a key in the error is masked."""
    import threading

    from vramtop.guard.loop import guard_loop
    from vramtop.machines.headless_runner import MAX_FAILURES

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
    # Its start and its leaving are timeline events, the reason masked there too.
    guard = [e.detail for e in timeline.read() if e.name == "guard"]
    assert [d["decision"] for d in guard] == ["started", "stopped"]
    assert str(guard[0]["why"]).startswith("guarding profile p (")
    assert "samples in a row failed" in str(guard[1]["why"])
    assert "sk-secret-999" not in str(guard[1]["why"])
