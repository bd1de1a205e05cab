"""`vramtop fleet`'s rows from an exporter's page: figures where the box answered with a fresh
sample, and a row that says what is wrong (never zeros, never old figures) where it did not."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.support.fleet_page import PAGE
from vramtop.core.fleet_rows import (
    STALE_AFTER_S,
    Fetched,
    Platform,
    Status,
    aged,
    collapse_news,
    collapses,
    row_for,
)
from vramtop.core.fleet_sources import Box, parse_box, parse_boxes
from vramtop.tui.fleet.cells import COLUMNS, cells, table_text

NOW = 1_800_000_000.0


def page(*, collapse: float = 0.0, age_s: float = 0.5, extra: str = "") -> str:
    text = PAGE.replace("{collapse}", str(collapse))
    return text.replace("{sampled_at}", repr(NOW - age_s)) + extra


def fetched(text: str | None, error: str | None = None) -> Fetched:
    return Fetched("r9700", "http://r9700:9464/metrics", NOW, text=text, error=error)


FIGURES = (
    "card",
    "platform",
    "server_state",
    "budget_bytes",
    "budget_ratio",
    "headroom_bytes",
    "kv_usage",
    "request_tps",
    "request_normal_tps",
    "door_held",
    "door_in_flight",
    "model",
    "samples",
)


def test_a_fresh_page_gives_every_figure_of_the_row() -> None:
    row = row_for(fetched(page()))
    assert row.status is Status.UP and row.problem is None
    assert row.card == "AMD Radeon AI PRO R9700" and row.platform is Platform.ROCM
    assert row.server_state == "running" and row.model == "qwen3.8-27b-nvfp4"
    assert row.budget_bytes == 3.0787869082e10 and row.budget_ratio == 0.9
    assert row.headroom_bytes == 2.88400343e9 and row.kv_usage == 0.25
    assert (row.request_tps, row.request_normal_tps) == (38.0, 41.0)
    assert row.open_findings == ("kv_pressure",) and not row.collapse
    assert (row.door_held, row.door_in_flight) == (3, 2)
    assert row.sample_age_s == pytest.approx(0.5) and row.samples == 12
    # Not served by the exporter: unknown, never a made-up value.
    assert row.max_model_len is None and row.guard is None and row.guard_running is None
    json = row.to_json()
    assert json["query_time"] == NOW and json["status"] == "up" and json["platform"] == "ROCm"


@pytest.mark.parametrize(
    ("got", "status", "words"),
    [
        (fetched(None, "no answer (refused)"), Status.UNREACHABLE, "no answer (refused)"),
        (fetched(None), Status.UNREACHABLE, "no answer"),
        (fetched("<html>not metrics</html>"), Status.UNREACHABLE, "not a vramtop export page"),
        (fetched("node_load1 0.5\n"), Status.UNREACHABLE, "not a vramtop export page"),
        (fetched(page(age_s=STALE_AFTER_S + 7)), Status.STALE, "sample 10 s old"),
        (
            fetched('vramtop_build_info{version="0.1.0"} 1.0\n'),
            Status.NO_SAMPLE,
            "not sampled yet",
        ),
    ],
)
def test_a_box_without_a_fresh_sample_is_a_row_that_says_so_with_no_figure(
    got: Fetched, status: Status, words: str
) -> None:
    row = row_for(got)
    assert row.status is status and row.problem is not None and words in row.problem
    assert all(getattr(row, name) is None for name in FIGURES)
    assert row.open_findings == () and not row.collapse
    # Its cells hold no figure: its status where the card would be, the reason in the note.
    shown = cells(row)
    assert len(shown) == len(COLUMNS) and shown[2] == status.value.replace("_", " ")
    assert shown[-1] == row.problem
    assert not any(ch.isdigit() for cell in shown[3:-1] for ch in cell)


def test_max_model_len_is_read_where_the_box_serves_it() -> None:
    row = row_for(fetched(page(extra="vramtop_max_model_len_tokens 163840.0\n")))
    assert row.max_model_len == 163_840
    assert cells(row)[COLUMNS.index("max len")] == "163,840"


def test_a_sample_from_a_clock_a_little_ahead_is_fresh_not_negative() -> None:
    row = row_for(fetched(page(age_s=-2.0)))
    assert row.status is Status.UP and row.sample_age_s == 0.0


@pytest.mark.parametrize(
    ("behind_s", "age_s", "status"),
    [(3600.0, 0.5, Status.UP), (3600.0, 10.0, Status.STALE), (-600.0, 0.5, Status.UP)],
)
def test_a_box_whose_clock_is_off_ours_is_judged_on_its_own_clock(
    behind_s: float, age_s: float, status: Status
) -> None:
    """Its Date header says its clock; its sample's age is read against that, not ours."""
    box_now = NOW - behind_s
    text = page(age_s=age_s + behind_s)  # sampled `age_s` before the box's own now
    row = row_for(replace(fetched(text), box_time=box_now))
    assert row.status is status
    assert row.sample_age_s == pytest.approx(age_s)
    # Without the box's clock, the hour-behind box's fresh sample would read as stale.
    assert row_for(fetched(text)).status is (Status.STALE if behind_s > 0 else Status.UP)


def test_the_collapse_is_named_in_the_row_and_by_the_banner() -> None:
    rows = [row_for(fetched(page(collapse=1.0))), row_for(fetched(page()))]
    rows[1] = replace(rows[1], name="spark")
    assert rows[0].collapse and "vram_contention" in rows[0].open_findings
    assert collapses(rows) == ["r9700"]
    assert "collapse" in cells(rows[0])[COLUMNS.index("findings")]


@pytest.mark.parametrize(
    ("extra", "kind", "platform"),
    [
        ("vramtop_wsl_vm_dedicated_bytes 1.0e9\n", "dedicated", Platform.WSL2),
        ("", "unified", Platform.UNIFIED),
        ("", "dedicated", Platform.ROCM),
    ],
)
def test_the_platform_is_read_from_what_the_box_serves(
    extra: str, kind: str, platform: Platform
) -> None:
    text = page(extra=extra).replace('memory_kind="dedicated"', f'memory_kind="{kind}"')
    if platform is not Platform.ROCM:
        text = text.replace("vramtop_gpu_gtt_total_bytes", "vramtop_other")
    assert row_for(fetched(text)).platform is platform


def test_a_card_without_gtt_or_wsl_is_native() -> None:
    text = page().replace("vramtop_gpu_gtt_total_bytes", "vramtop_other")
    assert row_for(fetched(text)).platform is Platform.NATIVE


def test_a_row_whose_box_has_not_answered_since_goes_unreachable_without_its_figures() -> None:
    row = row_for(fetched(page()))
    assert aged(row, NOW + STALE_AFTER_S) == row
    late = aged(row, NOW + STALE_AFTER_S + 2)
    assert late.status is Status.UNREACHABLE and late.problem == "no answer for 5 s"
    assert all(getattr(late, name) is None for name in FIGURES)


def test_boxes_are_named_name_equals_url_and_read_metrics_by_default() -> None:
    assert parse_box("desk=http://192.168.1.20:9464") == Box(
        "desk", "http://192.168.1.20:9464/metrics"
    )
    assert parse_box("spark=https://spark/x/metrics").url == "https://spark/x/metrics"


@pytest.mark.parametrize(
    ("texts", "words"),
    [
        (["desk"], "NAME=URL"),
        (["=http://a:1"], "NAME=URL"),
        (["desk=ftp://a:1"], "http://HOST:PORT"),
        (["desk=http://a:0"], "port"),
        (["de sk=http://a:1"], "a box's name"),
        (["a=http://x:1", "a=http://y:1"], "names two boxes"),
    ],
)
def test_bad_boxes_say_what_is_wrong(texts: list[str], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_boxes(texts)


def test_a_password_in_a_bad_url_is_masked() -> None:
    with pytest.raises(ValueError) as caught:
        parse_box("desk=ftp://me:hunter2@desk:9464")
    assert "hunter2" not in str(caught.value)


def test_the_text_table_has_a_line_per_box() -> None:
    rows = [row_for(fetched(page())), row_for(fetched(None, "no answer (refused)"))]
    lines = table_text(rows).splitlines()
    assert lines[0].split()[:3] == ["box", "age", "card"] and len(lines) == 3
    assert "AI PRO R9700" in lines[1] and "38/41" in lines[1] and "holding 3" in lines[1]
    assert "28.7G 0.90" in lines[1] and "2.7G" in lines[1]
    assert lines[2].split() == ["r9700", "unreachable:", "no", "answer", "(refused)"]


def test_a_collapse_is_told_once_per_finding() -> None:
    collapsed = row_for(fetched(page(collapse=1.0)))
    closed = row_for(fetched(page()))
    gone = row_for(fetched(None, "no answer"))
    told, news = collapse_news(frozenset(), [collapsed])
    assert told == {"r9700"} and len(news) == 1
    assert news[0].title == "vramtop fleet: collapse on r9700" and news[0].severity == "critical"
    assert "AMD Radeon AI PRO R9700" in news[0].body
    # Still open, then the box silent, then back still collapsed: the same finding, not told.
    for row in (collapsed, gone, collapsed):
        told, news = collapse_news(told, [row])
        assert news == [] and told == {"r9700"}
    # Closed on a fresh row, then open again: a new finding, told.
    told, news = collapse_news(told, [closed])
    assert told == frozenset() and news == []
    told, news = collapse_news(told, [collapsed])
    assert len(news) == 1


@pytest.mark.parametrize(
    ("series", "words", "running", "auto", "down", "budget"),
    [
        ("vramtop_guard_running 0\n", "none", False, None, None, None),
        ("vramtop_guard_running 1\n", "runs", True, None, None, None),
        (
            "vramtop_guard_running 1\nvramtop_guard_auto_remedy 0\n",
            "tells",
            True,
            False,
            None,
            None,
        ),
        (
            "vramtop_guard_running 1\nvramtop_guard_auto_remedy 1\n"
            'vramtop_guard_adaptive_budget_ratio{budget="outside"} 0.92\n'
            'vramtop_guard_adaptive_budget_ratio{budget="during"} 0.8\n'
            "vramtop_guard_adaptive_stepped_down 1\n",
            "auto ↓0.80",
            True,
            True,
            True,
            0.8,
        ),
        (
            "vramtop_guard_running 1\nvramtop_guard_auto_remedy 1\n"
            'vramtop_guard_adaptive_budget_ratio{budget="outside"} 0.92\n'
            'vramtop_guard_adaptive_budget_ratio{budget="during"} 0.8\n'
            "vramtop_guard_adaptive_stepped_down 0\n",
            "auto ↑0.92",
            True,
            True,
            False,
            0.92,
        ),
    ],
)
def test_the_guard_column_reads_the_boxs_guard_series(
    series: str,
    words: str,
    running: bool,
    auto: bool | None,
    down: bool | None,
    budget: float | None,
) -> None:
    row = row_for(fetched(page(extra=series)))
    assert cells(row)[COLUMNS.index("guard")] == words
    json = row.to_json()
    assert json["guard"] == words and json["guard_running"] is running
    assert json["guard_auto_remedy"] is auto and json["guard_stepped_down"] is down
    assert json["guard_budget_ratio"] == budget
