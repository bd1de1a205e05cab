"""Opening sooner when the memory itself shows the squeeze, and seconds that cannot be judged.

A collapse of the rate opens the finding on 5 of the last 6 judged seconds; when the card's
memory shows the desktop squeezing the server (the desktop holds more than the budget leaves
it, or the server's memory spilled), 3 of the last 4 are enough. A second with no normal to
judge it by counts neither way.
"""

from __future__ import annotations

from dataclasses import replace

from tests.support.synthetic import Card, Event, Tick, build, busy
from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.diagnosis.memory_evidence import (
    NO_NORMAL_RATE,
    desktop_over_headroom,
    squeeze_in_memory,
)
from vramtop.core.findings import VRAM_CONTENTION
from vramtop.core.model import GIB, Sample, SplitMethod
from vramtop.core.windows.spill import SpillEvidence

CALL = int(4.3 * GIB)  # the desktop during a video call
IDLE = int(1.35 * GIB)
CALL_AT = 60


def run(items: list[Tick | Event], card: Card) -> Diagnoser:
    d = Diagnoser()
    for record in build(card, items):
        if isinstance(record, tuple):
            d.feed_event(*record)
        else:
            d.feed_sample(record)
    return d


def contention(d: Diagnoser) -> list[float]:
    return [f.first_seen_t for f in d.all_findings() if f.kind == VRAM_CONTENTION]


def agent(t: int, decode: float, desktop: int = IDLE, **kw: object) -> Tick:
    """A second of agent work judged by vLLM's per-token latency (prefill in every second)."""
    kw.setdefault("prompt_tps", 2500.0)
    return busy(float(t), tps=decode, decode_tps=decode, desktop_bytes=desktop, **kw)  # type: ignore[arg-type]


def collapse_at_call(end: int = CALL_AT + 30) -> list[Tick | Event]:
    items: list[Tick | Event] = [(0.0, "start", {}), (1.0, "ready", {})]
    items += [agent(t, 77.0) for t in range(2, CALL_AT)]
    items += [agent(t, 8.0, CALL) for t in range(CALL_AT, end)]
    return items


def test_a_desktop_past_its_allowance_opens_after_three_collapsed_seconds() -> None:
    # Per-process numbers: the desktop holds 4.3 GiB where the budget leaves it ~1.7.
    native = run(collapse_at_call(), Card(wsl=False))
    assert contention(native) == [CALL_AT + 2.0]
    # A derived split cannot show the desktop past its allowance: the rate alone, 5 of 6.
    derived = run(collapse_at_call(), Card(wsl=True))
    assert contention(derived) == [CALL_AT + 4.0]


def stalls(card: Card, desktop_in_call: int) -> Diagnoser:
    """Agent work with a call under way, and long prompts stalling decoding for 3 s at a
    time (3 slow seconds of every 9)."""
    items: list[Tick | Event] = [(0.0, "start", {}), (1.0, "ready", {})]
    items += [agent(t, 77.0) for t in range(2, CALL_AT)]
    for t in range(CALL_AT, CALL_AT + 300):
        decode = 12.0 if t % 9 < 3 else 50.0  # a mild dip during the call, and stalls
        items.append(agent(t, decode, desktop_in_call))
    return run(items, card)


def test_stalls_during_a_call_that_fits_are_no_finding() -> None:
    # At 0.85 the call fits beside the server: the desktop stays within its allowance.
    assert contention(stalls(Card(wsl=False, util=0.85), CALL)) == []
    # At 0.93 with an idle desktop the card is full, but nothing shows a squeeze.
    assert contention(stalls(Card(wsl=False), IDLE)) == []


def test_the_same_stalls_with_the_desktop_past_its_allowance_are_contention() -> None:
    # The desktop took memory the server's budget needed: the slow seconds have their cause,
    # and the first stall (63–65 s) is named on its third second.
    assert contention(stalls(Card(wsl=False), CALL)) == [65.0]


def unjudged(t: int) -> Tick:
    """A second whose request is still reading its prompt: two tokens decoded (too few for
    the latency histogram) and no prompt counted yet."""
    return busy(float(t), tps=2.0, decode_tps=2.0, prompt_tps=0.0, desktop_bytes=CALL)


def test_seconds_that_cannot_be_judged_neither_open_nor_close() -> None:
    items: list[Tick | Event] = [(0.0, "start", {}), (1.0, "ready", {})]
    items += [agent(t, 77.0) for t in range(2, CALL_AT)]
    # Collapsed seconds alternate with seconds nothing can judge: once those counted as
    # healthy and the collapse never reached 5 of 6.
    for t in range(CALL_AT, CALL_AT + 20):
        items.append(agent(t, 8.0, CALL) if t % 2 == 0 else unjudged(t))
    # A long stretch of seconds that cannot be judged does not close it either.
    items += [unjudged(t) for t in range(CALL_AT + 20, CALL_AT + 60)]
    d = run(items, Card(wsl=True))
    assert contention(d) == [CALL_AT + 8.0]
    assert d.open_findings() and d.open_findings()[0].kind == VRAM_CONTENTION


def sample_with(desktop: int, method: SplitMethod) -> Sample:
    s = next(x for x in build(Card(wsl=False), [busy(1.0)]) if isinstance(x, Sample))
    assert s.split is not None
    return replace(s, split=replace(s.split, desktop_bytes=desktop, method=method))


def test_the_memory_shows_the_squeeze_past_the_allowance_or_by_a_spill() -> None:
    allowance = 32_607 * 1024**2 - int(32_607 * 1024**2 * 0.93 + 1) - GIB // 2
    near = sample_with(allowance + 100 * 1024**2, SplitMethod.PER_PROCESS)
    over = sample_with(allowance + GIB, SplitMethod.PER_PROCESS)
    over_measure = desktop_over_headroom(near, None)
    assert over_measure is not None and 99 * 1024**2 < over_measure < 101 * 1024**2
    # Less over than the outside-budget figure can be off by: not evidence.
    assert not squeeze_in_memory(near, None, None)
    assert squeeze_in_memory(over, None, None)
    # A measured outside-budget figure moves the allowance: 300 MiB more held outside the
    # budget leaves the desktop 300 MiB less.
    assert squeeze_in_memory(near, None, GIB // 2 + 300 * 1024**2)
    # A derived split never shows the desktop past its allowance: it cannot tell.
    derived = sample_with(allowance + GIB, SplitMethod.DERIVED)
    assert desktop_over_headroom(derived, None) is None
    assert not squeeze_in_memory(derived, None, None)
    spill = SpillEvidence(
        first_seen_t=1.0,
        baseline_shared_bytes=0,
        shared_bytes=GIB,
        peak_shared_bytes=GIB,
        rise_bytes=GIB,
        dedicated_bytes=28 * GIB,
        baseline_dedicated_bytes=29 * GIB,
    )
    assert squeeze_in_memory(derived, spill, None)


def test_a_call_in_the_first_seconds_is_named_from_one_healthy_second() -> None:
    # The normal is a high quantile of the first seconds: one healthy second among them is
    # what normal is, and the collapsed ones after it do not pull it down.
    items: list[Tick | Event] = [(0.0, "start", {}), (1.0, "ready", {})]
    items += [agent(2, 77.0), agent(3, 77.0)]
    items += [agent(t, 8.0, CALL) for t in range(4, 40)]
    d = run(items, Card(wsl=True))  # a derived split: the memory cannot show the squeeze
    # Known on the 5th judged second (7), then 5 of 6 (nothing in memory corroborates it).
    assert contention(d) == [12.0]
    normal = d.normal_rate()
    assert normal is not None and normal.tps == 77.0


def test_seconds_the_memory_shows_squeezed_teach_no_normal() -> None:
    # The same call seen through a per-process split: the desktop holds what the budget kept
    # for vLLM, so its collapsed seconds teach nothing; two healthy seconds are too few for
    # a normal, and the memory alone names the collapse, sooner, saying no rate confirmed it.
    items: list[Tick | Event] = [(0.0, "start", {}), (1.0, "ready", {})]
    items += [agent(2, 77.0), agent(3, 77.0)]
    items += [agent(t, 8.0, CALL) for t in range(4, 40)]
    d = run(items, Card(wsl=False))
    assert contention(d) == [8.0]  # the 5th of 6 seconds the memory shows it (4 to 8)
    assert d.normal_rate() is None
    found = d.open_findings()[0]
    assert found.confidence == NO_NORMAL_RATE


def test_an_interval_in_which_a_request_ended_is_judged_by_its_latency() -> None:
    # Short answers: every other sample finds no request running, yet tokens came in the
    # second before it. The per-token latency counts only decoded tokens, so those seconds
    # are judged (once no second with an idle end was, and this collapse was never named).
    items: list[Tick | Event] = [(0.0, "start", {}), (1.0, "ready", {})]
    items += [agent(t, 77.0) for t in range(2, CALL_AT)]
    for t in range(CALL_AT, CALL_AT + 30):
        ended = t % 2 == 1
        items.append(
            busy(float(t), tps=6.0, running=0, decode_tps=8.0, desktop_bytes=CALL)
            if ended
            else agent(t, 8.0, CALL)
        )
    d = run(items, Card(wsl=True))
    assert contention(d) == [CALL_AT + 4.0]
