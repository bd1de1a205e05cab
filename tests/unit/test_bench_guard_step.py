"""The guard's step bench, its pure parts: a relaunch event read as a step, and a step's
figures from the agent's requests under way while it ran."""

from __future__ import annotations

from bench.bench_guard_step import Request, Step, day_later, figures, steps_of


def test_a_relaunch_with_phases_is_a_step_and_its_own_share_leaves_vllms_out() -> None:
    events = [
        {"t": 50.0, "event": "start", "detail": {"phases": {"total_s": 4.0}}},
        {"t": 60.0, "event": "relaunch", "detail": {"result": "failed"}},  # not timed
        {
            "t": 100.0,
            "event": "relaunch",
            "detail": {
                "gpu_memory_utilization": 0.83,
                "result": "ok",
                "replayed": 4,
                "phases": {"total_s": 10.0, "ready_s": 7.5, "drained_s": 1.5},
            },
        },
    ]
    (step,) = steps_of(events)
    assert step == Step(
        began=90.0,
        ended=100.0,
        budget=0.83,
        result="ok",
        replayed=4,
        total_s=10.0,
        own_s=2.5,
        drained_s=1.5,
    )


def test_a_steps_figures_count_the_requests_under_way_while_it_ran() -> None:
    step = Step(90.0, 100.0, 0.83, "ok", 2, 10.0, 2.5, 1.5)
    requests = [
        Request(True, sent=80.0, first=80.5, ended=85.0, outcome="ok"),  # before: not counted
        Request(True, sent=88.0, first=88.5, ended=95.0, outcome="cut"),
        Request(True, sent=91.0, first=99.0, ended=100.5, outcome="ok"),
        Request(False, sent=89.0, first=None, ended=97.0, outcome="failed"),
        Request(False, sent=92.0, first=100.25, ended=100.25, outcome="ok"),
        Request(True, sent=99.5),  # still waiting at the step's end (and its second after)
    ]
    got = figures(step, requests, slack_s=1.0)
    assert (got.longest_wait_s, got.longest_plain_s) == (8.0, 8.25)
    assert (got.replayed, got.cut, got.failed) == (2, 1, 1)
    assert (got.own_s, got.total_s, got.drained_s) == (2.5, 10.0, 1.5)


def test_the_day_comes_later_by_its_lead() -> None:
    day = {"name": "field_report", "calls": [{"start": 60, "end": 240}]}
    assert day_later(day, 300.0) == {
        "name": "field_report",
        "calls": [{"start": 360.0, "end": 540.0}],
    }
