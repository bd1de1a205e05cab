"""The guard's policies, pure: samples in, decisions out, time the samples' own."""

from __future__ import annotations

from dataclasses import replace

from vramtop.core.budget import GIB, budget_bytes
from vramtop.core.findings import VRAM_CONTENTION, Finding, Remedy
from vramtop.core.guard.coordinator import Door, GuardConfig, GuardPolicy
from vramtop.core.guard.decisions import (
    ACTED,
    ADAPTIVE,
    CANCELLED,
    DONE,
    DOWN,
    SKIPPED,
    UP,
    WAITED,
)
from vramtop.core.model import (
    CacheConfig,
    GpuDevice,
    GpuReading,
    Sample,
    ServerInfo,
    ServerMetrics,
    ServerReading,
    ServerState,
    Split,
    SplitMethod,
)
from vramtop.core.remedy import FlagChange

TOTAL = round(31.84 * GIB)
OUTSIDE_BYTES = round(0.35 * GIB)


def sample(
    t: float,
    *,
    desktop: float = 1.35,
    running: int = 1,
    util: float = 0.93,
    state: ServerState = ServerState.RUNNING,
    started_at: float = 1000.0,
) -> Sample:
    budget = budget_bytes(TOTAL, util)
    desktop_b = round(desktop * GIB)
    server = budget + OUTSIDE_BYTES
    device = GpuDevice(0, "sim", TOTAL, desktop_b + server, TOTAL - desktop_b - server)
    return Sample(
        t=t,
        gpu=GpuReading(devices=(device,), source="sim"),
        server=ServerReading(
            url="http://127.0.0.1:8000",
            reachable=True,
            healthy=True,
            metrics=ServerMetrics(
                requests_running=float(running),
                requests_waiting=0.0,
                cache=CacheConfig(gpu_memory_utilization=util),
            ),
        ),
        info=ServerInfo(state=state, pid=42, started_at=started_at, budget=util),
        split=Split(
            total_bytes=TOTAL,
            server_bytes=server,
            desktop_bytes=desktop_b,
            free_bytes=TOTAL - desktop_b - server,
            method=SplitMethod.PER_PROCESS,
            detail="test",
            budget_bytes=budget,
            headroom_bytes=TOTAL - budget - OUTSIDE_BYTES,
        ),
    )


def collapse(first_seen: float = 5.0, util: float = 0.85) -> Finding:
    return Finding(
        kind=VRAM_CONTENTION,
        severity="critical",
        first_seen_t=first_seen,
        last_seen_t=first_seen,
        closed_t=None,
        summary="Generation fell to 7 tok/s",
        remedy=Remedy(action="relaunch", budget=util, max_model_len=163_840),
    )


def remedy_policy(**config: object) -> GuardPolicy:
    return GuardPolicy(GuardConfig(auto_remedy=True, **config))  # type: ignore[arg-type]


def test_a_collapse_open_ten_seconds_is_relaunched_at_its_remedy_between_turns() -> None:
    policy = remedy_policy()
    found = collapse()
    assert policy.observe(sample(10.0), [found]) == []
    assert policy.observe(sample(19.0), [found]) == []  # open 9 s: not yet
    waited = policy.observe(sample(20.0, running=2), [found])
    assert [d.decision for d in waited] == [WAITED]
    assert "2 running" in waited[0].why
    assert policy.observe(sample(30.0, running=1), [found]) == []
    acted = policy.observe(sample(31.0, running=0), [found])
    assert [d.decision for d in acted] == [ACTED]
    action = acted[0].action
    assert action is not None and action.flags == FlagChange(0.85, 163_840)
    assert acted[0].detail()["decision"] == ACTED
    assert acted[0].detail()["gpu_memory_utilization"] == 0.85
    assert policy.acting() == action
    # While it runs, nothing else is decided; its answer is said once.
    assert policy.observe(sample(32.0, running=0), [found]) == []
    done = policy.finished(40.0, "ok", "served")
    assert [(d.decision, d.result) for d in done] == [(DONE, "ok")]
    # The same finding is never acted on twice.
    assert policy.observe(sample(60.0, running=0), [found]) == []


def test_no_quiet_moment_in_120_s_skips_the_relaunch_and_says_why() -> None:
    policy = remedy_policy()
    found = collapse()
    policy.observe(sample(10.0), [found])
    assert [d.decision for d in policy.observe(sample(20.0, running=1), [found])] == [WAITED]
    assert policy.door_needed(21.0)
    assert policy.observe(sample(139.0, running=1), [found], door=Door()) == []
    decided = policy.observe(sample(140.0, running=1), [found], door=Door())
    assert [d.decision for d in decided] == [SKIPPED]
    assert "no front door" in decided[0].why
    assert policy.acting() is None and not policy.door_needed(141.0)


def test_a_front_door_that_holds_requests_lets_it_act_without_a_quiet_moment() -> None:
    policy = remedy_policy()
    found = collapse()
    policy.observe(sample(10.0), [found])
    assert [d.decision for d in policy.observe(sample(20.0, running=2), [found])] == [WAITED]
    decided = policy.observe(sample(21.0, running=2), [found], door=Door(in_flight=2))
    assert [d.decision for d in decided] == [ACTED]
    assert "front door holds the agent's next request" in decided[0].why


def test_nothing_is_done_while_a_start_or_stop_runs() -> None:
    policy = remedy_policy()
    found = collapse()
    policy.observe(sample(10.0), [found])
    busy = sample(20.0, running=0, state=ServerState.STARTING)
    assert [d.decision for d in policy.observe(busy, [found])] == [WAITED]
    assert policy.acting() is None
    assert [d.decision for d in policy.observe(sample(21.0, running=0), [found])] == [ACTED]


def test_at_most_three_automatic_relaunches_an_hour() -> None:
    policy = remedy_policy()
    t = 0.0
    outcomes = []
    for _ in range(5):
        found = collapse(first_seen=t)
        policy.observe(sample(t, running=0), [found])
        decided = policy.observe(sample(t + 10.0, running=0), [found])
        outcomes.append(decided[-1].decision)
        if policy.acting() is not None:
            policy.finished(t + 20.0, "ok", "served")
        t += 600.0  # one collapse every 10 minutes
    assert outcomes == [ACTED, ACTED, ACTED, SKIPPED, SKIPPED]
    # An hour after the first, one more is allowed.
    found = collapse(first_seen=3700.0)
    policy.observe(sample(3700.0, running=0), [found])
    assert policy.observe(sample(3710.0, running=0), [found])[-1].decision == ACTED


def test_a_relaunch_vllm_would_refuse_is_skipped_and_not_counted() -> None:
    policy = remedy_policy(per_hour=1)
    found = collapse()
    policy.observe(sample(0.0, running=0), [found])
    assert policy.observe(sample(10.0, running=0), [found])[-1].decision == ACTED
    refused = policy.finished(11.0, "refused", "No available memory for the cache blocks")
    assert [d.decision for d in refused] == [SKIPPED]
    assert "vLLM would refuse" in refused[0].why
    other = collapse(first_seen=20.0)
    policy.observe(sample(20.0, running=0), [other])
    assert policy.observe(sample(30.0, running=0), [other])[-1].decision == ACTED


def test_a_person_or_someone_elses_restart_wins_over_a_pending_action() -> None:
    policy = remedy_policy()
    found = collapse()
    policy.observe(sample(10.0), [found])
    policy.observe(sample(20.0, running=1), [found])
    cancelled = policy.person_acted(21.0, "a relaunch (key b)")
    assert [d.decision for d in cancelled] == [CANCELLED]
    assert policy.observe(sample(22.0, running=0), [found]) == []

    policy = remedy_policy()
    policy.observe(sample(10.0), [found])
    policy.observe(sample(20.0, running=1), [found])
    restarted = sample(21.0, running=0, started_at=2000.0)
    decided = policy.observe(restarted, [found])
    assert [d.decision for d in decided] == [CANCELLED]
    assert policy.acting() is None


def test_the_collapse_ending_cancels_its_pending_relaunch() -> None:
    policy = remedy_policy()
    found = collapse()
    policy.observe(sample(10.0), [found])
    policy.observe(sample(20.0, running=1), [found])
    decided = policy.observe(sample(21.0, running=0), [])
    assert [d.decision for d in decided] == [CANCELLED]
    assert policy.acting() is None


def adaptive_policy(settle_s: float = 60.0) -> GuardPolicy:
    return GuardPolicy(GuardConfig(adaptive=FlagChange(0.93, 262_144), settle_s=settle_s))


def run_call(policy: GuardPolicy, start: float) -> list[tuple[float, str, str | None, float]]:
    """A call from `start` (the desktop from 1.35 to 4.3 GiB in 4 s, for 180 s), sampled each
    second; every relaunch answers ok. (t, decision, step, util) of each decision."""
    said: list[tuple[float, str, str | None, float]] = []
    util = 0.93
    for second in range(400):
        t = start + second
        into = t - start
        desktop = 1.35 + 2.95 * min(1.0, into / 4.0) if into < 180 else 1.35
        decided = policy.observe(sample(t, desktop=desktop, running=second % 3, util=util), [])
        action = policy.acting()
        if action is not None:
            util = action.flags.budget
            decided += policy.finished(t + 0.5, "ok", "served")
        said += [
            (d.t, d.decision, d.action.step if d.action else None, d.action.flags.budget)
            for d in decided
            if d.action is not None
        ]
    return said


def test_the_budget_steps_down_on_the_rise_and_up_after_the_settle() -> None:
    policy = adaptive_policy(settle_s=60.0)
    said = run_call(policy, start=100.0)
    acted = [(t, step, util) for t, decision, step, util in said if decision == ACTED]
    assert [step for _, step, _ in acted] == [DOWN, UP]
    (down_t, _, down_util), (up_t, _, up_util) = acted
    # Down within the call's first seconds (its memory arrives in 4 s), below 0.93.
    assert 100.0 <= down_t <= 104.0
    assert down_util < 0.93
    # Up once the desktop has been back within 0.93's allowance for 60 s.
    assert up_t >= 100.0 + 180 + 60
    assert up_util == 0.93
    state = policy.adaptive_state()
    assert state is not None and state.outside == 0.93 and state.during == down_util
    # A second call: its own step down and up, one each.
    again = run_call(policy, start=600.0)
    assert [s for _, d, s, _ in again if d == ACTED] == [DOWN, UP]


def test_the_step_down_leaves_room_for_a_whole_call() -> None:
    policy = adaptive_policy()
    said = run_call(policy, start=0.0)
    down = next(util for _, decision, step, util in said if decision == ACTED and step == DOWN)
    # The field report's card: 0.93 leaves 1.88 GiB; a call needs ~3 GiB more than the idle
    # desktop's 1.35, plus the remedy's margin: 0.83 leaves 4.85 GiB.
    leaves = (TOTAL - budget_bytes(TOTAL, down) - OUTSIDE_BYTES) / GIB
    assert leaves >= 1.35 + 2.95


def test_a_failed_step_down_is_not_retried_during_the_same_call() -> None:
    policy = adaptive_policy()
    decisions = []
    for second in range(120):
        desktop = 1.35 + 2.95 * min(1.0, second / 4.0)
        decisions += policy.observe(sample(float(second), desktop=desktop, running=0), [])
        if policy.acting() is not None:
            decisions += policy.finished(second + 0.5, "rolled_back", "vLLM exited")
    acted = [d for d in decisions if d.decision == ACTED]
    assert len(acted) == 1 and acted[0].action is not None and acted[0].action.step == DOWN
    assert any(d.decision == DONE and d.result == "rolled_back" for d in decisions)


def test_a_guard_started_below_the_profiles_budget_steps_up_once_settled() -> None:
    policy = adaptive_policy(settle_s=30.0)
    acted = []
    for second in range(40):
        decided = policy.observe(sample(float(second), util=0.85, running=0), [])
        acted += [d for d in decided if d.decision == ACTED]
    assert [d.action.step for d in acted if d.action] == [UP]
    assert acted[0].t >= 30.0
    assert acted[0].action is not None and acted[0].action.policy == ADAPTIVE


def test_the_moment_reads_running_requests_and_the_allowance() -> None:
    from vramtop.core.guard.decisions import Moment

    m = Moment.of(sample(1.0, running=0, util=0.85))
    assert m.between_turns and not m.busy
    assert m.headroom_at(0.93) == TOTAL - budget_bytes(TOTAL, 0.93) - OUTSIDE_BYTES
    unknown = Moment.of(replace(sample(1.0), server=None))
    assert unknown.running is None and not unknown.between_turns


def test_a_door_that_answers_after_the_sample_lets_the_new_action_act_at_once() -> None:
    policy = remedy_policy()
    found = collapse()
    policy.observe(sample(10.0), [found])
    assert policy.door_answers(Door(in_flight=1)) == []  # nothing pending yet
    assert [d.decision for d in policy.observe(sample(20.0, running=1), [found])] == [WAITED]
    assert policy.door_answers(Door()) == []  # no door: it waits on
    decided = policy.door_answers(Door(in_flight=1))
    assert [d.decision for d in decided] == [ACTED] and decided[0].t == 20.0
    assert policy.pending() is None and policy.acting() is not None


def test_a_rise_seen_in_its_first_tenth_of_a_gib_still_steps_down() -> None:
    # The call's first sample only just past the rise line: its share is barely above where
    # it stood, which a collapse's remedy would read as a desktop that is back down.
    policy = adaptive_policy()
    for second in range(10):
        assert policy.observe(sample(float(second), running=1), []) == []
    decided = policy.observe(sample(10.0, desktop=1.64, running=0), [])
    assert [(d.decision, d.action.step if d.action else None) for d in decided] == [(ACTED, DOWN)]
    assert decided[0].action is not None and decided[0].action.flags.budget <= 0.84
