"""The fleet's rows read through Prometheus (pure): answers of its query API in, rows out. A
box Prometheus failed to scrape, whose series went stale, or whose exporter's sample is old
reads so with no figure, though Prometheus still answers with its last values; names from
the `box` label, else the instance; the sources a command line or a `[fleet]` table give."""

from __future__ import annotations

import pytest

from vramtop.core.fleet_panels import BoxStep, steps_of
from vramtop.core.fleet_queries import Answers, result_of, rows_from, scrape_interval_s
from vramtop.core.fleet_rows import Status
from vramtop.core.fleet_sources import sources, table_sources
from vramtop.core.json_types import JsonValue

NOW = 1_800_000_000.0
URL = "http://prom:9090"


def sample(metric_name: str, value: float, instance: str, **labels: str) -> JsonValue:
    metric = {"__name__": metric_name, "instance": instance, "job": "vramtop", **labels}
    return {"metric": metric, "value": [NOW, repr(value)]}


def page(instance: str, *, sampled_at: float = NOW - 1, **labels: str) -> list[JsonValue]:
    """A box's current series as Prometheus answers `{__name__=~"vramtop_.+"}`."""
    return [
        sample("vramtop_build_info", 1, instance, version="0.1.0", **labels),
        sample(
            "vramtop_gpu_info",
            1,
            instance,
            gpu="0",
            name="NVIDIA GB10",
            memory_kind="unified",
            **labels,
        ),
        sample("vramtop_budget_bytes", 3.0e10, instance, gpu="0", **labels),
        sample("vramtop_budget_ratio", 0.5, instance, **labels),
        sample("vramtop_kv_cache_usage_ratio", 0.25, instance, **labels),
        sample("vramtop_finding_open", 1, instance, kind="vram_contention", **labels),
        sample("vramtop_server_state", 1, instance, state="running", **labels),
        sample("vramtop_samples_total", 40, instance, **labels),
        sample("vramtop_last_sample_timestamp_seconds", sampled_at, instance, **labels),
    ]


def answers(
    series: list[JsonValue],
    *,
    up: dict[str, float],
    seen: tuple[str, ...] = (),
    scrapes: float = 60,
) -> Answers:
    return Answers(
        series=series,
        seen=[sample("", 1, instance) for instance in seen],
        scrapes=[sample("", scrapes, instance) for instance in up],
        up=[sample("up", value, instance) for instance, value in up.items()],
    )


def test_a_fresh_box_reads_its_figures_named_by_its_box_label() -> None:
    rows = rows_from(
        answers(page("10.0.0.2:9464", box="spark"), up={"10.0.0.2:9464": 1}),
        url=URL,
        query_time=NOW,
    )
    ((row, got),) = rows
    assert row.name == "spark" and row.status is Status.UP and got is not None
    assert row.instance == "10.0.0.2:9464" and row.url == URL
    assert row.card == "NVIDIA GB10" and row.platform == "unified" and row.budget_ratio == 0.5
    assert row.collapse and row.server_state == "running" and row.samples == 40
    assert row.sample_age_s == pytest.approx(1.0)
    assert row.to_json()["source"] == "prometheus"
    # Prometheus's own labels are not the exporter's: the page has the exporter's only.
    assert got.labels("vramtop_gpu_info") == [
        {"gpu": "0", "memory_kind": "unified", "name": "NVIDIA GB10"}
    ]


def test_the_guard_column_reads_the_guard_series_prometheus_holds() -> None:
    series = [
        *page("10.0.0.2:9464", box="spark"),
        sample("vramtop_guard_running", 1, "10.0.0.2:9464", box="spark"),
        sample("vramtop_guard_auto_remedy", 0, "10.0.0.2:9464", box="spark"),
        sample("vramtop_guard_adaptive_stepped_down", 1, "10.0.0.2:9464", box="spark"),
        sample(
            "vramtop_guard_adaptive_budget_ratio",
            0.4,
            "10.0.0.2:9464",
            box="spark",
            budget="during",
        ),
    ]
    ((row, _),) = rows_from(answers(series, up={"10.0.0.2:9464": 1}), url=URL, query_time=NOW)
    assert row.guard == "tells ↓0.40" and row.guard_budget_ratio == 0.4


def test_the_steps_read_through_prometheus_are_those_its_series_give() -> None:
    at = "10.0.0.2:9464"
    series = [
        *page(at, box="spark"),
        sample("vramtop_steps_total", 2, at, box="spark", kind="relaunch", asked_by="guard"),
        sample("vramtop_steps_total", 0, at, box="spark", kind="relaunch", asked_by="key"),
        sample("vramtop_steps_total", 0, at, box="spark", kind="start", asked_by="key"),
        sample(
            "vramtop_last_step_timestamp_seconds",
            NOW - 60,
            at,
            box="spark",
            kind="relaunch",
            asked_by="guard",
            result="ok",
        ),
        sample("vramtop_last_step_seconds", 41.5, at, box="spark", kind="relaunch"),
    ]
    ((_, got),) = rows_from(answers(series, up={at: 1}), url=URL, query_time=NOW)
    assert got is not None
    assert steps_of(got) == [
        BoxStep("start", ()),
        BoxStep("relaunch", (("guard", 2),), NOW - 60, "guard", "ok", 41.5),
    ]
    assert steps_of(rows_from(answers(page(at), up={at: 1}), url=URL, query_time=NOW)[0][1]) is None  # type: ignore[arg-type]


def test_without_a_box_label_the_instance_names_it_and_a_shared_label_is_told_apart() -> None:
    series = [*page("h1:9464", box="desk"), *page("h2:9464", box="desk"), *page("h3:9464")]
    rows = rows_from(
        answers(series, up={"h1:9464": 1, "h2:9464": 1, "h3:9464": 1}), url=URL, query_time=NOW
    )
    assert [row.name for row, _ in rows] == ["desk@h1:9464", "desk@h2:9464", "h3:9464"]


def no_figures(row: object) -> bool:
    return all(
        getattr(row, name) is None
        for name in ("card", "budget_bytes", "kv_usage", "headroom_bytes", "samples")
    )


def test_a_failed_scrape_reads_unreachable_not_its_last_values() -> None:
    # Prometheus still answers with the last values until they go stale: `up` says it failed.
    rows = rows_from(answers(page("h1:9464"), up={"h1:9464": 0}), url=URL, query_time=NOW)
    ((row, got),) = rows
    assert row.status is Status.UNREACHABLE and got is None and no_figures(row)
    assert "scrape" in (row.problem or "") and not row.collapse


def test_a_box_whose_series_went_stale_keeps_its_row_unreachable() -> None:
    rows = rows_from(answers([], up={}, seen=("h1:9464",)), url=URL, query_time=NOW)
    ((row, got),) = rows
    assert row.name == "h1:9464" and row.status is Status.UNREACHABLE and got is None
    assert no_figures(row)


def test_an_old_sample_reads_stale_past_the_limit_and_the_scrape_interval() -> None:
    old = page("h1:9464", sampled_at=NOW - 10)
    # Scraped every second (60 scrapes a minute): 10 s is past 3 s + 1 s.
    ((row, _),) = rows_from(answers(old, up={"h1:9464": 1}, scrapes=61), url=URL, query_time=NOW)
    assert row.status is Status.STALE and row.sample_age_s == pytest.approx(10) and no_figures(row)
    # Scraped every 15 s (5 scrapes a minute): a 10 s old sample is as fresh as it gets.
    ((row, _),) = rows_from(answers(old, up={"h1:9464": 1}, scrapes=5), url=URL, query_time=NOW)
    assert row.status is Status.UP


def test_the_scrape_interval_from_the_scrapes_of_a_minute() -> None:
    assert scrape_interval_s(61) == pytest.approx(1.0)
    assert scrape_interval_s(5) == pytest.approx(15.0)
    assert scrape_interval_s(None) == scrape_interval_s(1) == 60.0


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("<html>", "not a Prometheus API answer"),
        ({"status": "error", "error": "parse error"}, "parse error"),
        ({"status": "success", "data": {"resultType": "matrix", "result": []}}, "instant"),
    ],
)
def test_an_answer_that_is_not_an_instant_vector_says_why(body: JsonValue, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        result_of(body)


def test_prometheus_is_used_where_both_are_given_and_says_so() -> None:
    chosen = sources(["desk=http://desk:9464"], "http://user:secret@prom:9090/")
    assert chosen.boxes == () and chosen.prometheus == "http://user:secret@prom:9090"
    assert chosen.said is not None and "desk" in chosen.said and "secret" not in chosen.said
    assert sources([], "http://prom:9090").said is None


def test_a_fleet_table_gives_boxes_or_prometheus() -> None:
    table = table_sources({"desk": "http://desk:9464", "spark": "http://spark:9464"})
    assert [box.name for box in table.boxes] == ["desk", "spark"] and table.prometheus is None
    assert table.boxes[0].url == "http://desk:9464/metrics"
    both = table_sources({"desk": "http://desk:9464", "prometheus": "http://prom:9090"})
    assert both.prometheus == "http://prom:9090" and both.said and not both.boxes
    with pytest.raises(ValueError, match="prometheus"):
        table_sources({"prometheus": "prom:9090"})
