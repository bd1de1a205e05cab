"""`vramtop fleet --prometheus URL`: the same rows, read through a Prometheus server's HTTP API
instead of each box's exporter.

Pure: the answers of a few instant queries (`QUERIES`, evaluated at `query_time`) go in, one
row per box comes out. A box is a scrape target (its `instance` label) that served
`vramtop_build_info` within `SEEN_WINDOW`; its name is the target's `box` label where the
scrape configuration gives one, else its instance. Prometheus answers an instant query with
the last value it holds, so a value alone says nothing of freshness: a box reads unreachable
where Prometheus's latest scrape of it failed (`up` 0) or its series went stale (no current
value), and stale where its exporter's latest sample (`vramtop_last_sample_timestamp_seconds`)
is older than `STALE_AFTER_S` plus the box's scrape interval (a stuck sampler, a box whose
exporter answers but no longer samples); never with its last figures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from vramtop.core.fleet_rows import LAST_SAMPLE, STALE_AFTER_S, BoxRow, Labels, Page, Status, up_row
from vramtop.core.json_types import JsonValue

# Where the box's name comes from: this label where the scrape config sets it, else INSTANCE.
BOX_LABEL = "box"
INSTANCE = "instance"
# A box that served vramtop's page within this window keeps its row while it is down.
SEEN_WINDOW = "1h"
# The window the scrape interval is counted over (samples of one series in it).
RATE_WINDOW_S = 60


@dataclass(frozen=True)
class Queries:
    """The instant queries one refresh asks, by what they answer."""

    series: str = '{__name__=~"vramtop_.+"}'
    seen: str = f"last_over_time(vramtop_build_info[{SEEN_WINDOW}])"
    scrapes: str = f"count_over_time(vramtop_samples_total[{RATE_WINDOW_S}s])"
    up: str = "up"


QUERIES = Queries()


@dataclass(frozen=True)
class Answers:
    """The `data.result` of each query (a list of {metric, value}); see `Queries`."""

    series: Sequence[JsonValue]
    seen: Sequence[JsonValue]
    scrapes: Sequence[JsonValue]
    up: Sequence[JsonValue]


def result_of(body: JsonValue) -> list[JsonValue]:
    """The vector of an instant query's answer; ValueError saying why there is none."""
    if not isinstance(body, dict):
        raise ValueError("not a Prometheus API answer")
    if body.get("status") != "success":
        raise ValueError(f"the query failed: {body.get('error') or body.get('status')}")
    data = body.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        raise ValueError("not an instant vector")
    result = data.get("result")
    if not isinstance(result, list):
        raise ValueError("not an instant vector")
    return result


def _sample(item: JsonValue) -> tuple[dict[str, str], float] | None:
    """One element of a vector: its labels and value (None: not one, or not a number)."""
    if not isinstance(item, dict):
        return None
    metric, value = item.get("metric"), item.get("value")
    if not isinstance(metric, dict) or not isinstance(value, list) or len(value) != 2:
        return None
    try:
        number = float(str(value[1]))
    except ValueError:
        return None
    labels = {str(k): str(v) for k, v in metric.items()}
    return labels, number


def _by_instance(vector: Sequence[JsonValue]) -> dict[str, list[tuple[dict[str, str], float]]]:
    grouped: dict[str, list[tuple[dict[str, str], float]]] = {}
    for item in vector:
        sample = _sample(item)
        if sample is not None and INSTANCE in sample[0]:
            grouped.setdefault(sample[0][INSTANCE], []).append(sample)
    return grouped


def _one(grouped: Mapping[str, list[tuple[dict[str, str], float]]], instance: str) -> float | None:
    values = [value for _, value in grouped.get(instance, ()) if math.isfinite(value)]
    return values[0] if values else None


# Labels Prometheus adds to every series of a target: not the exporter's own.
_TARGET_LABELS = frozenset(("__name__", INSTANCE, "job", BOX_LABEL))


def _page(samples: list[tuple[dict[str, str], float]]) -> Page:
    """A box's current series as the page its exporter served (the target's labels dropped)."""
    by_name: dict[str, list[tuple[Labels, float]]] = {}
    for labels, value in samples:
        own = tuple(sorted((k, v) for k, v in labels.items() if k not in _TARGET_LABELS))
        by_name.setdefault(labels.get("__name__", ""), []).append((own, value))
    return Page(by_name)


def rows_from(
    answers: Answers, *, url: str, query_time: float, stale_after_s: float = STALE_AFTER_S
) -> list[tuple[BoxRow, Page | None]]:
    """One row per box Prometheus knows (its page where the row is UP), ordered by name."""
    series = _by_instance(answers.series)
    seen = _by_instance(answers.seen)
    scrapes, up = _by_instance(answers.scrapes), _by_instance(answers.up)
    instances = set(seen) | {
        instance
        for instance, samples in series.items()
        if any(labels.get("__name__") == "vramtop_build_info" for labels, _ in samples)
    }
    rows: list[tuple[BoxRow, Page | None]] = []
    for instance in instances:
        labels = [labels for labels, _ in (*seen.get(instance, ()), *series.get(instance, ()))]
        name = next((one[BOX_LABEL] for one in labels if one.get(BOX_LABEL)), instance)
        target = Target(name, instance, _one(up, instance), _one(scrapes, instance))
        page = _page(series.get(instance, []))
        rows.append(_row(target, page, url, query_time, stale_after_s))
    return sorted(_named_once(rows), key=lambda pair: pair[0].name)


@dataclass(frozen=True)
class Target:
    """A box as Prometheus scrapes it: its name, instance, `up` and scrapes in the window."""

    name: str
    instance: str
    up: float | None
    scrapes: float | None


def _row(
    target: Target, page: Page, url: str, query_time: float, stale_after_s: float
) -> tuple[BoxRow, Page | None]:
    def down(status: Status, problem: str, age: float | None = None) -> BoxRow:
        return BoxRow(
            target.name,
            url,
            status,
            query_time,
            problem,
            sample_age_s=age,
            instance=target.instance,
        )

    sampled_at = page.value(LAST_SAMPLE)
    if target.up == 0:
        return down(Status.UNREACHABLE, "Prometheus's latest scrape of it failed"), None
    if page.value("vramtop_build_info") is None:
        return down(Status.UNREACHABLE, "no current series in Prometheus (not scraped)"), None
    if sampled_at is None:
        return down(Status.NO_SAMPLE, "not sampled yet"), None
    age = max(0.0, query_time - sampled_at)
    if age > stale_after_s + scrape_interval_s(target.scrapes):
        return down(Status.STALE, f"sample {age:.0f} s old", age), None
    row = up_row(target.name, url, query_time, page, age)
    return replace(row, instance=target.instance), page


def scrape_interval_s(scrapes_in_window: float | None) -> float:
    """The box's scrape interval, from how many scrapes the last `RATE_WINDOW_S` hold (one
    scrape: the window itself, so that a box just scraped again is not judged too soon)."""
    if scrapes_in_window is None or scrapes_in_window < 2:
        return float(RATE_WINDOW_S)
    return RATE_WINDOW_S / (scrapes_in_window - 1)


def _named_once(rows: list[tuple[BoxRow, Page | None]]) -> list[tuple[BoxRow, Page | None]]:
    """Two targets with one `box` label: each named with its instance too (`desk@h:9464`)."""
    names = [row.name for row, _ in rows]
    return [
        (replace(row, name=f"{row.name}@{row.instance}"), page)
        if names.count(row.name) > 1
        else (row, page)
        for row, page in rows
    ]
