"""The field report, reproduced: a call at 0.93 collapses decode speed until a restart;
at 0.85 the same call costs a mild dip. The world, the engine and the scheduler run in the
test's process on a clock it moves (`tests.support.sim_card`): rates are tokens over
simulated seconds, so a busy machine cannot move them."""

from __future__ import annotations

import re

import pytest

from tests.support.sim_card import Server, SimCard

SPEED = 20.0  # the scheduler steps as the simulator's processes do at 20 times real time


def rates_around_a_call(card: SimCard, s: Server) -> tuple[float, float, float, float]:
    """Decode rate before, during and after a full call under one long request, and the KV
    usage at the height of the call."""
    s.start_request()
    s.run(4.0)
    before = s.rate()
    card.set_call(True)
    s.run_until(lambda: card.state()["call_level"] == 1.0)
    s.run(4.0)
    during = s.rate()
    usage = s.sched.kv_usage()
    card.set_call(False)
    s.run_until(lambda: card.state()["call_level"] == 0.0)
    s.run(4.0)
    after = s.rate()
    s.stop_request()
    return before, during, after, usage


def test_call_at_093_collapses_until_restart(capsys: pytest.CaptureFixture[str]) -> None:
    card = SimCard(speed=SPEED)
    s = card.server(0.93)
    before, during, after, usage = rates_around_a_call(card, s)
    assert usage < 0.05  # not a full KV cache: low usage throughout
    assert before > 60
    assert during < 12 and after < 12
    assert during / before < 0.2 and after / before < 0.2
    server = card.state()["servers"][0]
    assert server["spilled_bytes"] > 2 * 1024**3
    text = capsys.readouterr().out  # what the server logged: its startup and stats lines
    assert "Error" not in text and "ERROR" not in text  # nothing tells the user
    stats = re.findall(
        r"Engine 000: Avg prompt throughput: [\d.]+ tokens/s, Avg generation throughput: "
        r"([\d.]+) tokens/s, Running: (\d+) reqs, Waiting: \d+ reqs, GPU KV cache usage: "
        r"([\d.]+)%, Prefix cache hit rate: [\d.]+%",
        text,
    )
    # Low throughout (the report saw 1.7 %): nowhere near KV pressure.
    assert stats and max(float(kv) for _, _, kv in stats) < 10.0

    # Restart only the server: the same load is fast again.
    s.exit()
    s2 = card.server(0.93)
    s2.start_request()
    s2.run(4.0)
    assert s2.rate() > 60


def test_call_at_085_is_only_a_mild_dip() -> None:
    card = SimCard(speed=SPEED)
    s = card.server(0.85, max_model_len=163_840)  # the field report's fix: both flags
    before, during, after, _usage = rates_around_a_call(card, s)
    assert 0.45 < during / before < 0.85
    # Recovered, not collapsed (the engine's own ±3 % wobble moves it); a collapse puts it
    # under 0.2.
    assert after / before > 0.8
    assert card.state()["servers"][0]["spilled_bytes"] == 0
