"""A per-request rate above 0 is never drawn "0" (the panel read "0/req" beside a generation
that went on when a collapse brought it under 0.5 tok/s): the throughput panel, the door
line, the banner's words, the fleet's cell and box screen, `--once`'s text."""

from __future__ import annotations

from vramtop.core.diagnosis.collapse import collapse_words
from vramtop.core.diagnosis.slowdown import slowdown_words
from vramtop.core.diagnosis.throughput import ThroughputView
from vramtop.core.fleet_rows import BoxRow, Status
from vramtop.core.model import DoorReading
from vramtop.core.remedy import Remedy
from vramtop.tui.fleet.cells import rate
from vramtop.tui.widgets.throughput_panel import DoorRow, generation_row

WIDE = 200


def _view(each: float) -> ThroughputView:
    return ThroughputView(
        t=1.0,
        generation_tps=0.4,
        prompt_tps=0.0,
        normal_generation_tps=160.0,
        shown_generation_tps=0.4,
        shown_normal_generation_tps=160.0,
        per_request_tps=each,
        measure="generation / running",
        normal_per_request_tps=80.0,
        requests_running=2.0,
        requests_waiting=0.0,
        normal=None,
        origin="learned now",
    )


def test_the_panel_and_the_door_line_draw_a_rate_under_half_a_token_as_it_is() -> None:
    line = generation_row(_view(0.3), 0.4).lay_out(WIDE)[0].plain
    assert "0.3/req" in line and " 0/req" not in line, line
    assert " 0.4 tok/s" in line, line  # (a generation under 1 too)
    door = DoorRow(DoorReading(address="127.0.0.1:8000", in_flight=2), 0.3).draw(WIDE).plain
    assert "0.3 tok/s/req" in door, door


def test_the_banner_words_and_the_fleet_say_it_too() -> None:
    words = collapse_words(0.04, 80.0, "", 0.5, "the card", 0.97)
    assert "fell to 0.04 tok/s per request" in words, words
    slow = slowdown_words(0.3, 80.0, Remedy(action="restart", why="restart it"))
    assert "runs at 0.3 of its normal 80" in slow, slow
    row = BoxRow(name="a", url="u", status=Status.UP, query_time=0.0, request_tps=0.3)
    assert rate(row).startswith("0.3/"), rate(row)
