"""A step as its timeline event tells it: the last one, its phases' seconds, the histogram."""

from __future__ import annotations

import math

from vramtop.core.server_events import Event
from vramtop.core.step_report import (
    PhaseHistogram,
    last_step,
    last_total,
    observe_steps,
    phase_seconds,
    step_lines,
)


def test_the_last_step_is_the_last_start_restart_or_relaunch_with_phases() -> None:
    events = [
        Event(1.0, "start", {"result": "ok", "phases": {"total_s": 60.0}}),
        Event(2.0, "relaunch", {"result": "rolled_back", "phases": {"total_s": 90.0}}),
        Event(3.0, "stop", {"result": "ok"}),
        Event(4.0, "restart", {"result": "ok"}),  # written before phases were timed
    ]
    step = last_step(events)
    assert step == {
        "action": "relaunch",
        "t": 2.0,
        "result": "rolled_back",
        "message": None,
        "phases": {"total_s": 90.0},
        "slow_parts": [],
    }
    assert last_total(events) == 90.0
    assert last_step(events[2:]) is None and last_total(events[2:]) is None


def test_a_step_left_half_done_is_the_last_step_and_says_so_but_was_not_timed() -> None:
    said = "the vramtop carrying it out ended half-way; vLLM became ready without it (pid 7)"
    events = [
        Event(1.0, "start", {"result": "ok", "phases": {"total_s": 60.0, "ready_s": 58.0}}),
        # As an interrupted step's event is written: its phases only vLLM's log told.
        Event(2.0, "restart", {"result": "interrupted", "message": said, "phases": {}}),
    ]
    step = last_step(events)
    assert step is not None
    assert (step["action"], step["result"], step["message"]) == ("restart", "interrupted", said)
    assert step_lines(step) == ["last restart, interrupted", f"  {said}"]
    # The time the console gives the next step to expect is the last one timed.
    assert last_total(events) == 60.0
    events.append(
        Event(
            3.0,
            "relaunch",
            {
                "result": "failed",
                "message": "vLLM exited with code 1",
                "phases": {"total_s": 12.0, "weights_s": 4.0},
            },
        )
    )
    assert step_lines(last_step(events) or {}) == [
        "last relaunch: 12 s, failed (vLLM: weights 4.0 s)",
        "  vLLM exited with code 1",
    ]
    assert last_total(events) == 12.0


def test_the_first_request_served_after_a_step_is_added_from_its_own_event() -> None:
    restart = Event(10.5, "restart", {"result": "ok", "phases": {"total_s": 70.0}})
    events = [
        Event(1.0, "start", {"result": "ok", "phases": {"total_s": 60.0}}),
        Event(2.0, "first_served", {"step": "start", "step_t": 1.0, "first_served_s": 0.4}),
        restart,
        # Another step's, and one of the same kind at another time: neither is this one's.
        Event(11.0, "first_served", {"step": "relaunch", "step_t": 10.5, "first_served_s": 9}),
        Event(11.5, "first_served", {"step": "restart", "step_t": 9.0, "first_served_s": 8}),
    ]
    assert last_step(events)["phases"] == {"total_s": 70.0}  # type: ignore[index]
    events.append(
        Event(12.0, "first_served", {"step": "restart", "step_t": 10.5, "first_served_s": 1.25})
    )
    assert last_step(events)["phases"] == {  # type: ignore[index]
        "total_s": 70.0,
        "first_served_s": 1.25,
    }


def test_only_seconds_count_as_phases() -> None:
    event = Event(
        1.0,
        "restart",
        {"phases": {"stopped_s": 2, "weights_gib": 21.8, "compile_cached": True, "ready_s": -1}},
    )
    assert phase_seconds(event) == {"stopped": 2.0}


def test_a_bound_counts_in_its_own_bucket_and_the_rest_above_the_largest() -> None:
    histogram = PhaseHistogram().observed(60.0).observed(60.5).observed(5000.0)
    buckets = dict(histogram.cumulative())
    assert (buckets[30.0], buckets[60.0], buckets[90.0], buckets[900.0]) == (0, 1, 2, 2)
    assert buckets[math.inf] == histogram.count == 3
    assert histogram.total_s == 5120.5
    seen = observe_steps({}, [Event(1.0, "start", {"phases": {"total_s": 1.0}})])
    assert seen["total"].count == 1


def test_the_last_step_in_words() -> None:
    step = {
        "action": "restart",
        "phases": {
            "stopped_s": 1.5,
            "ready_s": 66.0,
            "weights_s": 18.0,
            "weights_gb_per_s": 1.3,
            "compile_s": 43.1,
            "compile_cached": False,
            "total_s": 80.25,
        },
        "slow_parts": ["compilation took 43 s …"],
    }
    assert step_lines(step) == [
        "last restart: 80 s (stopped 1.5 s, ready 66 s; vLLM: weights 18 s at 1.30 GB/s, "
        "compile 43 s)",
        "slow: compilation took 43 s …",
    ]
    assert step_lines({"action": "start", "phases": {}}) == ["last start"]
