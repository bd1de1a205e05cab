"""Seconds in which the memory shows the desktop's squeeze never teach the normal rate, on
every simulated card: a relaunch at 0.85 during a call runs at about two thirds of the normal
for as long as the call lasts, and that is told as vram_slowdown against the normal learned
before the call, never learned as the new normal. The card, the simulated vLLM and the
console's backend run in the test's process on a clock the test moves."""

from __future__ import annotations

import pytest

from tests.support.sim_card import CardSupervisor, SimCard
from vramtop.core.findings import Kind
from vramtop.core.remedy import FlagChange, RelaunchOrder
from vramtop.machines.interface import Frame

SPEED = 20.0


@pytest.mark.parametrize(("card_name", "wsl"), [("5090", False), ("5090", True), ("r9700", False)])
def test_a_relaunch_during_a_call_does_not_learn_the_calls_rate_as_normal(
    card_name: str, wsl: bool
) -> None:
    card = SimCard("manual", speed=SPEED, card=card_name)
    supervisor = CardSupervisor(card, "demo", 0.93, max_model_len=131_072)
    with supervisor.backend(wsl=wsl) as backend:

        def seconds(n: int) -> list[Frame]:
            frames = []
            for _ in range(n):
                supervisor.run(1.0)
                frames.append(backend.tick(log_limit=0))
            return frames

        before = seconds(60)[-1]
        assert before.normal_rate is not None and before.normal_rate.tps is not None
        normal = before.normal_rate.tps
        card.set_call(True)
        seconds(20)  # the call collapses the server at 0.93
        assert backend.relaunch(RelaunchOrder(FlagChange(0.85))).ok
        during = seconds(90)
        for frame in during:
            view = frame.throughput
            assert view is not None and view.normal is not None
            assert view.normal.tps == pytest.approx(normal, rel=0.05), view
        last = during[-1]
        assert last.throughput is not None and last.throughput.per_request_tps is not None
        assert last.throughput.per_request_tps < 0.8 * normal
        assert Kind.VRAM_SLOWDOWN in {f.kind for f in last.findings}


def test_on_the_spark_a_call_that_squeezes_system_memory_does_not_teach_the_normal() -> None:
    # The Spark's unified memory: the call's squeeze collapses decode speed at its default
    # budget (the simulator has no milder dip there); no second of it becomes the normal.
    card = SimCard("spark", speed=SPEED, card="spark")
    supervisor = CardSupervisor(card, "demo", card.machine.card.budget, max_model_len=131_072)
    with supervisor.backend() as backend:
        for _ in range(60):
            supervisor.run(1.0)
            before = backend.tick(log_limit=0)
        assert before.normal_rate is not None and before.normal_rate.tps is not None
        normal = before.normal_rate.tps
        card.set_call(True)
        for _ in range(120):
            supervisor.run(1.0)
            frame = backend.tick(log_limit=0)
            view = frame.throughput
            assert view is not None and view.normal is not None
            assert view.normal.tps == pytest.approx(normal, rel=0.05), view
        last = frame.throughput
        assert last is not None and last.per_request_tps is not None
        assert last.per_request_tps < 0.35 * normal
        assert Kind.VRAM_CONTENTION in {f.kind for f in frame.findings}
