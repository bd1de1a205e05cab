"""One throughput view, read by everyone: on every frame of every recording under the tests'
fixtures, played through the replay backend, and of the demo's field-report day on the
simulated card (its clock moved by the test), the throughput panel's generation line, the
banner of a collapse or a slowdown, the door line, `--once --json`'s throughput object and
the exporter's series give the same per-request rate and the same normal, as drawn."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.sim_card import CardSupervisor, SimCard
from vramtop.core.diagnosis.throughput import ThroughputView
from vramtop.core.exposition import ExportState, series_for
from vramtop.core.findings import Finding, Kind
from vramtop.core.model import DoorReading, Sample
from vramtop.core.remedy import FlagChange, RelaunchOrder
from vramtop.machines.interface import Frame
from vramtop.machines.replay_backend import ReplayBackend
from vramtop.session.session_reader import SessionReader
from vramtop.tui.format import tps
from vramtop.tui.widgets.finding_banner import banner_text
from vramtop.tui.widgets.throughput_panel import door_row, frame_view, generation_row

TESTS = Path(__file__).resolve().parents[1]
RECORDINGS = sorted(
    [*(TESTS / "fixtures").rglob("*.jsonl"), *(TESTS / "unit" / "fixtures").rglob("*.jsonl")]
)
WIDE = 200  # every figure drawn
DOOR = DoorReading(address="127.0.0.1:8000", in_flight=1, decode_tps_p50=47.0)


def said(frame: Frame) -> dict[str, tuple[str, str] | None]:
    """What each reader says of the frame's per-request rate and normal, as drawn (None: it
    says none). The door line gives the rate alone."""
    view = frame_view(frame)
    told: dict[str, tuple[str, str] | None] = {}
    line = generation_row(view, frame.sample.rates.generation_tps).lay_out(WIDE)[0].plain
    panel = re.search(r"(\S+)/req · normal (\S+)", line)
    told["panel"] = (panel[1], panel[2]) if panel else None
    door = door_row(frame)
    if door is not None:
        drawn = re.search(r"(\S+) tok/s/req", door.draw(WIDE).plain)
        assert drawn is not None
        told["door"] = None if drawn[1] == "—" else (drawn[1], "")
    # `--once --json` gives the figures to two decimals: drawn as the panel draws them from
    # the view's own, unless the two decimals fall on a half (79.4999 is 79.5 there).
    once = view.to_json() if view is not None else {}
    rate, normal = once.get("per_request_tps"), once.get("normal_per_request_tps")
    told["once"] = None
    if isinstance(rate, float) and isinstance(normal, float) and view is not None:
        assert view.per_request_tps is not None and view.normal_per_request_tps is not None
        assert abs(rate - view.per_request_tps) <= 0.005
        assert abs(normal - view.normal_per_request_tps) <= 0.005
        told["once"] = (tps(view.per_request_tps), tps(view.normal_per_request_tps))
    exported = {
        s.name: s.value for s in series_for(ExportState("t", frame.sample, throughput=view))
    }
    rate_series = exported.get("vramtop_request_decode_tokens_per_second")
    normal_series = exported.get("vramtop_request_decode_normal_tokens_per_second")
    told["exporter"] = (
        (tps(rate_series), tps(normal_series))
        if rate_series is not None and normal_series is not None
        else None
    )
    for finding in frame.findings:
        told[f"banner {finding.kind}"] = banner_figures(finding, view)
    return told


def banner_figures(finding: Finding, view: ThroughputView | None) -> tuple[str, str] | None:
    """The per-request rate and normal the banner's words give for `finding` (None: none),
    at the precision each kind's words use."""
    banner = banner_text(finding, throughput=view).plain
    if finding.kind == Kind.VRAM_SLOWDOWN:
        words = re.search(r"runs at (\S+) of its normal (\S+) tok/s per request", banner)
    elif finding.kind == Kind.VRAM_CONTENTION:
        words = re.search(r"fell to (\S+) tok/s per request \(\d+% of the normal (\d+)", banner)
    else:
        return None
    return (words[1], words[2]) if words else None


def check(frame: Frame) -> bool:
    """Every reader agrees on `frame`; True when a per-request rate was told."""
    view = frame_view(frame)
    told = said(frame)
    rate = view.per_request_tps if view is not None else None
    normal = view.normal_per_request_tps if view is not None else None
    expected = (tps(rate), tps(normal)) if rate is not None and normal else None
    where = (frame.sample.t, told)
    assert told["panel"] == expected, where
    assert told["once"] == expected, where
    assert told["exporter"] == expected, where
    if "door" in told:
        assert told["door"] == (None if rate is None else (tps(rate), "")), where
    for finding in frame.findings:
        figures = told[f"banner {finding.kind}"]
        if figures is None or rate is None or not normal:
            continue  # no rate this second: the banner gives the finding's own words
        precision = ".0f" if finding.kind == Kind.VRAM_SLOWDOWN else ".1f"
        assert figures == (format(rate, precision), f"{normal:.0f}"), where
    return expected is not None


def replayed(path: Path) -> Iterator[Frame]:
    """Each recorded sample's frame, as the replay backend makes it (a door added, so the
    door line is drawn too)."""
    times = [r.t for r in SessionReader(path).records() if isinstance(r, Sample)]
    clock = [0.0]
    backend = ReplayBackend(path, speed=1.0, clock=lambda: clock[0])
    first = times[0] if times else 0.0
    for t in times:
        clock[0] = t - first
        frame = backend.tick(log_limit=0)
        sample = frame.sample
        yield Frame(
            replace(sample, door=DOOR),
            findings=frame.findings,
            normal=frame.normal,
            normal_rate=frame.normal_rate,
            throughput=frame.throughput,
        )


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.name)
def test_every_reader_gives_the_same_rate_on_every_recorded_frame(path: Path) -> None:
    frames = list(replayed(path))
    assert frames
    for frame in frames:
        view: ThroughputView | None = frame.throughput
        assert view is None or view.t == frame.sample.t
        check(frame)


def test_every_reader_gives_the_same_rate_through_the_demos_field_report_day() -> None:
    # The day of the field report on the simulated card: two calls (60-240 s, 420-600 s) at
    # 0.93; a person relaunches at 0.85 between them, so the second call runs slower than
    # normal. Each simulated second is a frame.
    card = SimCard("field_report", speed=20.0)
    supervisor = CardSupervisor(card, "demo", 0.93, max_model_len=131_072)
    told = 0
    kinds: set[str] = set()
    with supervisor.backend() as backend:
        for second in range(660):
            if second == 300:
                assert backend.relaunch(RelaunchOrder(FlagChange(0.85))).ok
            supervisor.run(1.0)
            frame = backend.tick(log_limit=0)
            kinds |= {f.kind for f in frame.findings}
            told += check(frame)
    assert told > 500  # a per-request rate was told on nearly every second
    assert {Kind.VRAM_CONTENTION, Kind.VRAM_SLOWDOWN} <= kinds
