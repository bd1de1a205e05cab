"""`vramtop fleet`: one row per box, read from the text of its `vramtop export` endpoint.

Pure: a fetch's outcome (the page, or why there is none) and the time it was asked go in,
a `BoxRow` value comes out. A box that does not answer, whose page is not vramtop's, or
whose latest sample is older than `STALE_AFTER_S` is a row that says so with every figure
unknown (None): never zeros, never the figures of an earlier answer.

The rows use what the exporter serves (the README's metric list), and
`vramtop_max_model_len_tokens` and the guard's series (`vramtop_guard_*`) where a box
serves them; what a box does not serve is None here, shown as unknown.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from vramtop.core.findings import Kind
from vramtop.core.json_types import JsonObject

if TYPE_CHECKING:
    from vramtop.core.news import News

# A sample older than this (by the box's own clock, against the query's) is stale: the
# exporter samples every second, so three missed samples say its sampler is stuck.
STALE_AFTER_S = 3.0
# A box whose clock (its answer's Date header) is off ours by more than this has its sample's
# age measured on its own clock: a WSL2 VM's clock drifts, and its fresh samples must not read
# as stale (or a stuck one as fresh) for that.
SKEW_S = 2.0
# The finding that is the silent collapse (the desktop squeezes vLLM, generation falls).
COLLAPSE = Kind.VRAM_CONTENTION


# vLLM's --max-model-len: served by exporters that have it (not yet in the metric list).
MAX_MODEL_LEN = "vramtop_max_model_len_tokens"
# When the box's exporter took its latest sample (Unix time, on the box's clock).
LAST_SAMPLE = "vramtop_last_sample_timestamp_seconds"


class Status(StrEnum):
    """How a box answered the latest query."""

    UP = "up"  # its exporter answered with a fresh sample
    UNREACHABLE = "unreachable"  # no answer, or an answer that is not a vramtop page
    STALE = "stale"  # it answered, but its latest sample is older than STALE_AFTER_S
    NO_SAMPLE = "no_sample"  # it answered before its first sample


class Platform(StrEnum):
    WSL2 = "WSL2"
    UNIFIED = "unified"
    ROCM = "ROCm"
    NATIVE = "native"


@dataclass(frozen=True)
class Fetched:
    """One query of one box: its page, or why there is none; `query_time` in Unix time."""

    name: str
    url: str
    query_time: float
    text: str | None = None
    error: str | None = None
    box_time: float | None = None  # the box's clock as its answer says (Date: to the second)


@dataclass(frozen=True)
class BoxRow:
    """What the fleet shows of one box. Every figure None: unknown (or not exported)."""

    name: str
    url: str
    status: Status
    query_time: float
    problem: str | None = None  # why the row is not UP, in the user's words
    sample_age_s: float | None = None
    card: str | None = None
    platform: Platform | None = None
    server_state: str | None = None  # running, starting, stopped, crashed...; "down"; "up"
    budget_bytes: float | None = None
    budget_ratio: float | None = None
    # `vramtop_max_model_len_tokens`, where the box's exporter serves it (an addition).
    max_model_len: int | None = None
    headroom_bytes: float | None = None
    kv_usage: float | None = None
    request_tps: float | None = None
    request_normal_tps: float | None = None
    open_findings: tuple[str, ...] = ()
    door_held: int | None = None
    door_in_flight: int | None = None
    guard: str | None = None  # the guard's cell in words (`guard_words`); None: not served
    guard_running: bool | None = None
    guard_auto_remedy: bool | None = None
    guard_stepped_down: bool | None = None  # an adaptive guard's step (None: not adaptive)
    guard_budget_ratio: float | None = None  # the adaptive guard's budget in force
    model: str | None = None
    samples: int | None = None  # the box's samples_total: the fleet sees it move
    # Read through Prometheus: the scrape target's `instance` label (None: read directly).
    instance: str | None = None

    @property
    def collapse(self) -> bool:
        return COLLAPSE in self.open_findings

    def to_json(self) -> JsonObject:
        """The row as `vramtop fleet --once --json` prints it (unknown: null)."""
        return {
            "name": self.name,
            "url": self.url,
            "status": self.status.value,
            "problem": self.problem,
            "query_time": self.query_time,
            "sample_age_s": self.sample_age_s,
            "card": self.card,
            "platform": self.platform.value if self.platform is not None else None,
            "model": self.model,
            "server_state": self.server_state,
            "budget_bytes": self.budget_bytes,
            "budget_ratio": self.budget_ratio,
            "max_model_len": self.max_model_len,
            "desktop_headroom_bytes": self.headroom_bytes,
            "kv_cache_usage_ratio": self.kv_usage,
            "request_decode_tokens_per_second": self.request_tps,
            "request_decode_normal_tokens_per_second": self.request_normal_tps,
            "open_findings": list(self.open_findings),
            "collapse": self.collapse,
            "door_held": self.door_held,
            "door_in_flight": self.door_in_flight,
            "guard": self.guard,
            "guard_running": self.guard_running,
            "guard_auto_remedy": self.guard_auto_remedy,
            "guard_stepped_down": self.guard_stepped_down,
            "guard_budget_ratio": self.guard_budget_ratio,
            "samples": self.samples,
            "source": "exporter" if self.instance is None else "prometheus",
            "instance": self.instance,
        }


Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Page:
    """A page's samples by name: each a list of (labels, value)."""

    samples: Mapping[str, list[tuple[Labels, float]]] = field(default_factory=dict)

    def value(self, name: str, **labels: str) -> float | None:
        for have, value in self.samples.get(name, ()):
            held = dict(have)
            if all(held.get(k) == v for k, v in labels.items()) and math.isfinite(value):
                return value
        return None

    def labels(self, name: str) -> list[dict[str, str]]:
        return [dict(have) for have, _ in self.samples.get(name, ())]

    def where_one(self, name: str, label: str) -> list[str]:
        """The `label` of each of `name`'s series whose value is 1."""
        return [
            dict(have).get(label, "") for have, value in self.samples.get(name, ()) if value == 1
        ]


def parse_page(text: str) -> Page | None:
    """The samples of a Prometheus text page; None when it is not one (or not vramtop's)."""
    # Imported on first use, as the vLLM parser does: the package's __init__ loads its HTTP
    # exporter, which the core must not import at its own import.
    from prometheus_client.parser import text_string_to_metric_families

    samples: dict[str, list[tuple[Labels, float]]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples.setdefault(sample.name, []).append(
                    (tuple(sorted(sample.labels.items())), float(sample.value))
                )
    except (ValueError, TypeError, IndexError, KeyError):
        return None
    if "vramtop_build_info" not in samples:
        return None
    return Page(samples)


def row_for(fetched: Fetched, *, stale_after_s: float = STALE_AFTER_S) -> BoxRow:
    """The row of one box from one query."""
    return read_box(fetched, stale_after_s=stale_after_s)[0]


def read_box(
    fetched: Fetched, *, stale_after_s: float = STALE_AFTER_S
) -> tuple[BoxRow, Page | None]:
    """The row of one box from one query, and its page where the row is UP (the box's
    panels read it); no page for a row without a fresh sample."""

    def down(status: Status, problem: str, age: float | None = None) -> BoxRow:
        return BoxRow(
            fetched.name, fetched.url, status, fetched.query_time, problem, sample_age_s=age
        )

    if fetched.text is None:
        return down(Status.UNREACHABLE, fetched.error or "no answer"), None
    page = parse_page(fetched.text)
    if page is None:
        return down(Status.UNREACHABLE, "not a vramtop export page"), None
    sampled_at = page.value(LAST_SAMPLE)
    if sampled_at is None:
        return down(Status.NO_SAMPLE, "not sampled yet"), None
    age = sample_age(fetched, sampled_at)
    if age > stale_after_s:
        return down(Status.STALE, f"sample {age:.0f} s old", age), None
    return up_row(fetched.name, fetched.url, fetched.query_time, page, age), page


def sample_age(fetched: Fetched, sampled_at: float) -> float:
    """How old the box's latest sample is: on our clock, or on the box's own where the two
    are more than SKEW_S apart. Never below 0 (a clock a little ahead is not a sample from
    the future; the Date header is to the second)."""
    now = fetched.query_time
    if fetched.box_time is not None and abs(now - fetched.box_time) > SKEW_S:
        now = fetched.box_time
    return max(0.0, now - sampled_at)


def up_row(name: str, url: str, query_time: float, page: Page, age: float) -> BoxRow:
    """The row of a box whose page holds a fresh sample (`age` s old)."""
    gpu = page.labels("vramtop_gpu_info")
    first = gpu[0] if gpu else {}
    info = page.labels("vramtop_server_info")
    held, in_flight = page.value("vramtop_door_held"), page.value("vramtop_door_in_flight")
    samples = page.value("vramtop_samples_total")
    max_len = page.value(MAX_MODEL_LEN)
    guard = read_guard(page)
    return BoxRow(
        name=name,
        url=url,
        status=Status.UP,
        query_time=query_time,
        sample_age_s=age,
        card=first.get("name") or None,
        platform=platform(page, first.get("memory_kind")),
        server_state=server_state(page),
        budget_bytes=page.value("vramtop_budget_bytes"),
        budget_ratio=page.value("vramtop_budget_ratio"),
        max_model_len=None if max_len is None else int(max_len),
        headroom_bytes=page.value("vramtop_desktop_headroom_bytes"),
        kv_usage=page.value("vramtop_kv_cache_usage_ratio"),
        request_tps=page.value("vramtop_request_decode_tokens_per_second"),
        request_normal_tps=page.value("vramtop_request_decode_normal_tokens_per_second"),
        open_findings=tuple(sorted(page.where_one("vramtop_finding_open", "kind"))),
        door_held=None if held is None else int(held),
        door_in_flight=None if in_flight is None else int(in_flight),
        model=(info[0].get("model") or None) if info else None,
        samples=None if samples is None else int(samples),
        guard=guard_words(guard),
        guard_running=guard.running,
        guard_auto_remedy=guard.auto_remedy,
        guard_stepped_down=guard.stepped_down,
        guard_budget_ratio=guard.budget_ratio,
    )


@dataclass(frozen=True)
class GuardFacts:
    """The box's guard as its `vramtop_guard_*` series say (None: not served)."""

    running: bool | None = None
    auto_remedy: bool | None = None
    stepped_down: bool | None = None
    budget_ratio: float | None = None  # the adaptive budget in force


def _flag(value: float | None) -> bool | None:
    return None if value is None else value == 1


def read_guard(page: Page) -> GuardFacts:
    running = _flag(page.value("vramtop_guard_running"))
    if not running:
        return GuardFacts(running=running)
    down = _flag(page.value("vramtop_guard_adaptive_stepped_down"))
    budget = "during" if down else "outside"
    return GuardFacts(
        running=True,
        auto_remedy=_flag(page.value("vramtop_guard_auto_remedy")),
        stepped_down=down,
        budget_ratio=None
        if down is None
        else page.value("vramtop_guard_adaptive_budget_ratio", budget=budget),
    )


def guard_words(guard: GuardFacts) -> str | None:
    """The guard's cell: "none" where no guard runs; else "auto" (it relaunches a collapse
    on its own), "tells" (it only tells) or "runs" (its lock does not say), and an adaptive
    guard's budget in force, "↓" while stepped down for a call; None: not served."""
    if guard.running is None:
        return None
    if not guard.running:
        return "none"
    words = {True: "auto", False: "tells", None: "runs"}[guard.auto_remedy]
    if guard.stepped_down is None:
        return words
    arrow = "↓" if guard.stepped_down else "↑"
    budget = "" if guard.budget_ratio is None else f"{guard.budget_ratio:.2f}"
    return f"{words} {arrow}{budget}"


def platform(page: Page, memory_kind: str | None) -> Platform | None:
    """WSL2 where the WSL VM's counters are served, unified memory, ROCm where the card has
    GTT (AMD), else native; None before the card is known."""
    if page.value("vramtop_wsl_vm_dedicated_bytes") is not None:
        return Platform.WSL2
    if memory_kind == "unified":
        return Platform.UNIFIED
    if page.value("vramtop_gpu_gtt_total_bytes") is not None:
        return Platform.ROCM
    return Platform.NATIVE if memory_kind is not None else None


def server_state(page: Page) -> str | None:
    """The supervised server's state; a watched URL's: up or down; None: unknown."""
    states = page.where_one("vramtop_server_state", "state")
    if states:
        return states[0]
    up = page.value("vramtop_server_up")
    if up is None:
        return None
    return "up" if up == 1 else "down"


def rows_for(fetched: Iterable[Fetched]) -> list[BoxRow]:
    return [row_for(one) for one in fetched]


def collapses(rows: Iterable[BoxRow]) -> list[str]:
    """The names of the boxes whose collapse finding is open."""
    return [row.name for row in rows if row.collapse]


def aged(row: BoxRow, now: float, *, stale_after_s: float = STALE_AFTER_S) -> BoxRow:
    """`row` as it reads at `now`: a row whose query is older than `stale_after_s` (its box
    has not answered since: a fetch still hangs) says so, with no figure of the old answer."""
    waited = now - row.query_time
    if waited <= stale_after_s:
        return row
    problem = f"no answer for {waited:.0f} s"
    return BoxRow(
        row.name, row.url, Status.UNREACHABLE, row.query_time, problem, instance=row.instance
    )


def collapse_news(
    told: frozenset[str], rows: Iterable[BoxRow]
) -> tuple[frozenset[str], list[News]]:
    """The news of each box whose collapse has opened since it was last told, and the boxes
    told now. Once per finding: a box is told again only after a fresh row showed its collapse
    closed (a box that stops answering mid-collapse and comes back collapsed is not told
    twice)."""
    from vramtop.core.news import OPENED, News

    now = set(told)
    news: list[News] = []
    for row in rows:
        if row.status is not Status.UP:
            continue
        if row.collapse and row.name not in now:
            now.add(row.name)
            card = f" ({row.card})" if row.card else ""
            news.append(
                News(
                    key=f"{OPENED}:fleet:{row.name}:{COLLAPSE}",
                    title=f"vramtop fleet: collapse on {row.name}",
                    body=f"The desktop squeezes vLLM's memory on {row.name}{card} and "
                    "generation has collapsed. Look at that box's console for the remedy.",
                    severity="critical",
                    change=OPENED,
                )
            )
        elif not row.collapse:
            now.discard(row.name)
    return frozenset(now), news
