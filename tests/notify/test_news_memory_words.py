"""The news of a collapse that memory alone names (no normal rate): its opening sentence says
what the memory showed, never that vLLM "slowed" (there is no normal to have slowed from) nor,
where only vLLM's buffers were seen evicted into GTT, that the desktop took its memory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from tests.support.synthetic import Card, build, busy
from tests.unit.test_normal_rate import contention, feed, mid_collapse, run, windows_mid_call
from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.diagnosis.memory_evidence import NO_NORMAL_RATE
from vramtop.core.findings import Evidence, Finding
from vramtop.core.model import GIB, Sample
from vramtop.core.news import finding_opened


def only(findings: list[Finding]) -> Finding:
    (found,) = findings
    assert found.confidence == NO_NORMAL_RATE
    return found


def windows_side() -> Finding:
    """WSL2: Windows' counters show the desktop's programs past what the budget leaves them."""
    samples = [s for s in build(Card(wsl=True), mid_collapse()) if isinstance(s, Sample)]
    return only(
        contention(feed(Diagnoser(), [replace(s, windows=windows_mid_call(s.t)) for s in samples]))
    )


def split_over() -> Finding:
    """A per-process split: the desktop holds what the budget kept for vLLM."""
    return only(contention(run(mid_collapse(), Card(wsl=False))))


def gtt_alone() -> Finding:
    """AMD: the desktop at its usual share, within what the budget leaves it, while vLLM's
    buffers are seen moving into GTT (system memory)."""
    items = [busy(float(t), tps=8.0, decode_tps=8.0) for t in range(1, 40)]
    samples = [s for s in build(Card(wsl=False), items) if isinstance(s, Sample)]
    evicted = [
        replace(s, split=replace(s.split, server_gtt_bytes=int(1.5 * GIB) if s.t >= 3 else 0))
        for s in samples
        if s.split is not None
    ]
    found = only(contention(feed(Diagnoser(), evicted)))
    assert found.evidence["spill_source"] == "gtt"
    assert found.evidence["desktop_over_allowance_bytes"] < 256 * 2**20  # type: ignore[operator]
    return found


def at_rate(finding: Finding, tps: float | None) -> Finding:
    """The finding as a sample with `tps` tokens/s (None: none running) would leave it."""
    return replace(finding, evidence=Evidence({**finding.evidence, "generation_tps": tps}))


@pytest.mark.parametrize("tps", [8.2, None])
def test_vllms_buffers_evicted_into_gtt_alone_are_not_said_as_the_desktop_taking_memory(
    tps: float | None,
) -> None:
    news = finding_opened(at_rate(gtt_alone(), tps))
    lead = news.body.split(". ")[0]
    assert "desktop took" not in lead and "slowed" not in lead
    if tps:
        assert lead == (
            "vLLM runs at 8 tok/s (no normal rate known yet): 1.5 GiB of its memory was moved "
            "out of VRAM into system memory"
        )
    else:
        assert lead == (
            "1.5 GiB of vLLM's memory was moved out of VRAM into system memory (no normal rate "
            "known yet)"
        )
    assert news.body.endswith("(b in the console).")  # the remedy is not cut off


@pytest.mark.parametrize("made", [windows_side, split_over])
def test_the_desktop_past_its_allowance_took_the_memory_with_no_normal_to_have_slowed_from(
    made: Callable[[], Finding],
) -> None:
    found = made()
    assert finding_opened(at_rate(found, 8.2)).body.startswith(
        "vLLM runs at 8 tok/s (no normal rate known yet): the desktop took its memory. Relaunch at"
    )
    assert finding_opened(at_rate(found, None)).body.startswith(
        "The desktop took vLLM's memory (no normal rate known yet). Relaunch at"
    )
