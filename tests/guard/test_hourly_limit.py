"""The automatic remedy's hourly limit on its own, in simulated seconds."""

from __future__ import annotations

from vramtop.core.guard.hourly_limit import HOUR_S, HourlyLimit


def test_the_limit_refuses_past_its_count_in_any_hour_and_says_when_the_next_may_come() -> None:
    limit = HourlyLimit(per_hour=2)
    assert limit.refusal(0.0, "0.85") is None
    limit.started(0.0)
    limit.started(600.0)
    why = limit.refusal(1200.0, "0.85")
    assert why is not None and "2 automatic relaunches" in why and "at 0.85" in why
    assert "in 40 min" in why  # the one at 0 leaves the hour at 3600
    assert limit.refusal(HOUR_S, "0.85") is None


def test_a_relaunch_vllm_refused_does_not_count() -> None:
    limit = HourlyLimit(per_hour=1)
    limit.started(10.0)
    assert limit.refusal(20.0, "0.85") is not None
    limit.refused()
    assert limit.refusal(20.0, "0.85") is None
