"""vLLM's /metrics page (Prometheus text) turned into a `ServerMetrics` value.

Each line the page's samples are read from is parsed by `prometheus_text` (by hand beside
prometheus_client, which the exporter uses: why is said there).

Tolerant by design: metric names drift between vLLM releases, pages can arrive truncated, and
a monitor must show what it could read rather than nothing. `parse_metrics` never raises: a
line it cannot read is skipped and counted (`ServerMetrics.skipped_lines`).

Untrusted too: the page may come from a proxy, another build or something that is not vLLM
at all. A value outside what vLLM can report (a negative count, a KV usage of -3.0, 1e308
tokens, a budget of 0) is dropped and counted (`ServerMetrics.dropped_values`): its figure is
unknown, never shown or used. A series written twice on one page (the same name and labels:
a page concatenated by a proxy) is read once, the repeat counted the same way; engines are
told apart by their labels and still add up.
"""

from __future__ import annotations

import math
import re

from vramtop.core.model import CacheConfig, ServerMetrics
from vramtop.core.vllm.prometheus_text import read_samples, read_samples_kept

_PREFIX = "vllm:"

# Summed over engines and models: these add up across data-parallel engines.
_SUMMED = {
    "vllm:num_requests_running": "requests_running",
    "vllm:num_requests_waiting": "requests_waiting",
    "vllm:prompt_tokens": "prompt_tokens_total",
    "vllm:generation_tokens": "generation_tokens_total",
    "vllm:num_preemptions": "preemptions_total",
    "vllm:prefix_cache_queries": "prefix_cache_queries_total",
    "vllm:prefix_cache_hits": "prefix_cache_hits_total",
}
# A fraction per engine: averaged, since a sum of fractions means nothing. The first name wins
# when a page has both (the old name was kept beside the new one for a few releases).
_KV_USAGE_NAMES = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
_CACHE_INFO = "vllm:cache_config_info"
# The per-token decode latency histogram, newest name first (`time_per_output_token_seconds`
# before it was renamed): its `_sum` and `_count` series, summed over engines. One name's pair
# is used whole, never a sum from one name and a count from the other.
_DECODE_LATENCY_NAMES = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
_DECODE_LATENCY_SERIES = tuple(
    name + part for name in _DECODE_LATENCY_NAMES for part in ("_sum", "_count")
)
# Each request's first token: counted in `generation_tokens` but never an inter-token
# latency observation (see `tokens_per_observation`).
_FIRST_TOKEN_COUNT = "vllm:time_to_first_token_seconds_count"
_WANTED = frozenset(
    (*_SUMMED, *_KV_USAGE_NAMES, _CACHE_INFO, *_DECODE_LATENCY_SERIES, _FIRST_TOKEN_COUNT)
)
# What vLLM can report, per series. Counts are whole numbers (a Prometheus client writes
# vLLM's integer counters and gauges as `903.0`); the bounds are far beyond any real server
# (10^15 tokens is a million tokens/s for thirty years) and well short of what breaks the
# arithmetic: a value past them is not vLLM's.
MAX_COUNT = 1e15
MAX_REQUESTS = 1e6  # requests running or waiting on one engine (max_num_seqs is ~256-4096)
MAX_SECONDS = 1e12  # a latency histogram's cumulative sum
# KV usage is a fraction; vLLM's own arithmetic never leaves [0, 1] by more than rounding.
_FRACTION_SLACK = 1e-6
MAX_NAME_CHARS = 1024  # a model's name or path
_REQUEST_GAUGES = frozenset(("vllm:num_requests_running", "vllm:num_requests_waiting"))
# A page is ~50 KB of which vramtop reads a dozen lines; handing only those to the parser
# makes a scrape several times cheaper. TYPE/HELP lines are dropped too: sample names keep
# their `_total` either way, and a missing TYPE only makes a family "unknown". The prefixes
# are a quick first test; the exact names then drop the lines that only share a prefix
# (`_created`, `_by_source`, `_by_reason`: a third of a real page's candidates), which
# `_Collector.add` would ignore anyway.
_LINE_PREFIXES = tuple(sorted(_WANTED))
_WANTED_NAMES = frozenset(name for base in _WANTED for name in (base, base + "_total"))
# The counters among them (their fields are running totals): a Prometheus client writes a
# counter's sample with `_total`.
_COUNTERS = frozenset(name for name, field in _SUMMED.items() if field.endswith("_total"))
# The names of the samples `parse_metrics` reads as a Prometheus client writes them: what a
# server is asked for when it can give a page of those alone (prometheus_client's
# `?name[]=`). Kept to one spelling each: the server writes each request into its log. (A
# server that spells one otherwise gives a short page without it, and is read whole.)
SAMPLE_NAMES = tuple(sorted(base + "_total" if base in _COUNTERS else base for base in _WANTED))
# Where a sample's name ends, as the parser reads it: at its labels or at the value.
_NAME_END = re.compile(r"[{ \t]")
# A whole line whose name (up to `_NAME_END`) is one of `_WANTED_NAMES`, after its "\n".
_WANTED_LINE = re.compile(
    "\n((?:"
    + "|".join(re.escape(name) for name in sorted(_WANTED_NAMES, key=len, reverse=True))
    + r")(?=[{ \t\n]|\Z)[^\n]*)"
)
# The line breaks `str.splitlines` knows besides "\n".
_OTHER_BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


# Tokens one latency observation can carry: speculative decoding's proposals plus the one
# verified (vLLM's methods propose a handful, rarely tens). More is not vLLM's arithmetic.
MAX_TOKENS_PER_OBSERVATION = 64.0
# Below these, the ratio is one token per observation plus noise: the scrapes' timing with the
# first tokens known, and without them the first tokens of requests that began (a request of
# 80 tokens adds 1/79 to the ratio; speculative decoding adds 0.3 and more).
_MTP_SLACK_FIRST_KNOWN = 1.05
_MTP_SLACK_FIRST_UNKNOWN = 1.2


def tokens_per_observation(previous: ServerMetrics, current: ServerMetrics) -> float:
    """Tokens each inter-token latency observation carried between two scrapes: 1 without
    speculative decoding. With MTP or another speculative method vLLM observes one latency
    per output event, and an event can carry several tokens (vLLM PR #52853), so a decode
    rate from the histogram's count alone reads low: Δ generation_tokens / Δ count, less the
    requests' first tokens (the time-to-first-token histogram's count: generated tokens no
    inter-token latency counts). 1 where it cannot be told (a counter unknown or reset, no
    observation, a ratio no speculative method gives)."""

    def delta(before: float | None, after: float | None) -> float | None:
        if before is None or after is None or after < before:
            return None
        return after - before

    events = delta(previous.inter_token_latency_count, current.inter_token_latency_count)
    tokens = delta(previous.generation_tokens_total, current.generation_tokens_total)
    if not events or tokens is None:
        return 1.0
    first = delta(previous.first_token_count, current.first_token_count)
    slack = _MTP_SLACK_FIRST_UNKNOWN if first is None else _MTP_SLACK_FIRST_KNOWN
    ratio = (tokens - (first or 0.0)) / events
    if ratio < slack or ratio > MAX_TOKENS_PER_OBSERVATION:
        return 1.0
    return ratio


def shown_text(value: object, most: int) -> str | None:
    """A name the server gives (model, version) as vramtop may show it: text of at most
    `most` characters with no control character (which would reach the terminal), else
    None."""
    if not isinstance(value, str) or not value or len(value) > most:
        return None
    if any(ch < " " or "\x7f" <= ch < "\xa0" for ch in value):
        return None
    return value


def plausible(base: str, value: float) -> bool:
    """Whether `value` is one vLLM can report for the sample `base` (its name without
    `_total`)."""
    if not math.isfinite(value) or value < 0:
        return False
    if base in _KV_USAGE_NAMES:
        return value <= 1 + _FRACTION_SLACK
    if base.endswith("_sum"):
        return value <= MAX_SECONDS
    limit = MAX_REQUESTS if base in _REQUEST_GAUGES else MAX_COUNT
    return value <= limit and value == int(value)


class _Collector:
    """Accumulates the samples vramtop reads, keyed by metric name without `_total`."""

    def __init__(self) -> None:
        # (base name, exposed with `_total`) -> values. A page could carry both spellings of
        # one counter; the `_total` one is preferred so they are never added together.
        self.values: dict[tuple[str, bool], list[float]] = {}
        self.model_name: str | None = None
        self.cache_labels: dict[str, str] | None = None
        # Each series read so far (name and labels, in any order): a repeat is not added.
        self.seen: set[tuple[str, frozenset[tuple[str, str]]]] = set()
        # Spellings with a value vLLM cannot report: unknown as a whole (one engine's absurd
        # value would make the others' sum a wrong figure rather than an unknown one).
        self.implausible: set[tuple[str, bool]] = set()
        self.dropped = 0

    def add(self, name: str, labels: tuple[tuple[str, str], ...], value: float) -> None:
        if not name.startswith(_PREFIX):
            return
        with_total = name.endswith("_total")
        base = name[: -len("_total")] if with_total else name
        if base not in _WANTED:
            return
        series = (name, frozenset(labels))
        if series in self.seen:
            self.dropped += 1
            return
        self.seen.add(series)
        if self.model_name is None:
            model = next((v for k, v in labels if k == "model_name" and v), None)
            self.model_name = shown_text(model, MAX_NAME_CHARS)
        if base == _CACHE_INFO:
            if self.cache_labels is None:
                self.cache_labels = dict(labels)
            return
        if not plausible(base, value):
            self.dropped += 1
            self.implausible.add((base, with_total))
            return
        self.values.setdefault((base, with_total), []).append(value)

    def get(self, base: str) -> list[float] | None:
        for key in ((base, True), (base, False)):
            if key in self.implausible:
                return None
            if key in self.values:
                return self.values[key]
        return None

    def result(self, skipped_lines: int) -> ServerMetrics:
        # Values by field name (floats, or None where the page had none).
        summed: dict[str, float | None] = {}
        for base, field_name in _SUMMED.items():
            found = self.get(base)
            summed[field_name] = sum(found) if found else None
        kv_usage: float | None = None
        for name in _KV_USAGE_NAMES:
            found = self.get(name)
            if found:
                kv_usage = sum(found) / len(found)
                break
        latency_sum = latency_count = None
        for name in _DECODE_LATENCY_NAMES:
            sums, counts = self.get(name + "_sum"), self.get(name + "_count")
            if sums and counts:
                latency_sum, latency_count = sum(sums), sum(counts)
                break
        first_tokens = self.get(_FIRST_TOKEN_COUNT)
        cache, cache_dropped = _cache_config(self.cache_labels or {})
        return ServerMetrics(
            kv_cache_usage=None if kv_usage is None else min(kv_usage, 1.0),
            model_name=self.model_name,
            cache=cache,
            inter_token_latency_sum_s=latency_sum,
            inter_token_latency_count=latency_count,
            first_token_count=sum(first_tokens) if first_tokens else None,
            skipped_lines=skipped_lines,
            dropped_values=self.dropped + cache_dropped,
            **summed,
        )


def parse_metrics(text: str) -> ServerMetrics:
    """Read the figures vramtop uses from a /metrics page; whatever is unreadable is None."""
    collector = _Collector()
    skipped = 0
    info_lines: list[str] = []
    for line in wanted_lines(text):
        if line.startswith(_CACHE_INFO):
            info_lines.append(line)
            continue
        # Line by line: one bad (or cut-off) line costs only itself, and is counted.
        samples = read_samples(line)
        skipped += samples is None
        for name, labels, value in samples or ():
            collector.add(name, labels, value)
    # After the rest, where vLLM prints it.
    for line in info_lines:
        samples = read_samples_kept(line)
        skipped += samples is None
        for name, labels, value in samples or ():
            collector.add(name, labels, value)
    return collector.result(skipped)


def wanted_lines(text: str) -> list[str]:
    """The page's lines whose sample name is one vramtop reads, in page order (as
    `text.splitlines()` splits it).

    One search of the page finds them: testing its ~650 lines one by one was most of a
    scrape's CPU. A page with any other line break than "\n" (which `splitlines` also
    splits at, and a Prometheus page never has) is split and tested line by line."""
    if any(other in text for other in _OTHER_BREAKS):
        return [
            line
            for line in text.splitlines()
            if line.startswith(_LINE_PREFIXES) and _name(line) in _WANTED_NAMES
        ]
    return _WANTED_LINE.findall("\n" + text)


def series_read(text: str) -> frozenset[str]:
    """The series (sample name and labels, as the page writes them) of the lines
    `parse_metrics` reads: a page with the same series as another gives every figure the
    other gives, from the same sources."""
    return frozenset(_series_text(line) for line in wanted_lines(text))


def only_read(text: str) -> bool:
    """Whether every sample on the page is one `parse_metrics` reads (comments aside): a
    page that kept to the names asked for (`SAMPLE_NAMES`)."""
    samples = sum(1 for line in text.split("\n") if line and not line.startswith("#"))
    return samples == len(wanted_lines(text))


def _series_text(line: str) -> str:
    line = line.split(" # ", 1)[0]  # an exemplar has labels of its own
    close = line.rfind("}")
    return line[: close + 1] if close >= 0 else _name(line)


def _name(line: str) -> str:
    end = _NAME_END.search(line)
    return line[: end.start()] if end else line


# What vLLM can report in `cache_config_info`, per label: (least, most, whole number).
_CACHE_BOUNDS: dict[str, tuple[float, float, bool]] = {
    "block_size": (1, 2**20, True),
    "gpu_memory_utilization": (0, 1, False),  # a share of the card: 0 itself is none
    "num_gpu_blocks": (0, 2**40, True),
    "kv_cache_size_tokens": (0, 2**48, True),
    "kv_cache_memory_bytes": (0, 2**50, True),  # a pebibyte
    "kv_cache_max_concurrency": (0, 1e9, False),
}


def _cache_config(labels: dict[str, str]) -> tuple[CacheConfig, int]:
    """The labels vramtop reads, and how many held a value vLLM cannot report (dropped)."""
    values: dict[str, float | None] = {}
    dropped = 0
    for label, (least, most, integral) in _CACHE_BOUNDS.items():
        value = _float(labels.get(label))
        if value is not None and not (
            least <= value <= most
            and (value > 0 or label != "gpu_memory_utilization")
            and (not integral or value == int(value))
        ):
            value, dropped = None, dropped + 1
        values[label] = value

    def whole(label: str) -> int | None:
        value = values[label]
        return None if value is None else int(value)

    config = CacheConfig(
        block_size=whole("block_size"),
        cache_dtype=_text(labels.get("cache_dtype")),
        gpu_memory_utilization=values["gpu_memory_utilization"],
        num_gpu_blocks=whole("num_gpu_blocks"),
        kv_cache_size_tokens=whole("kv_cache_size_tokens"),
        kv_cache_memory_bytes=whole("kv_cache_memory_bytes"),
        kv_cache_max_concurrency=values["kv_cache_max_concurrency"],
    )
    return config, dropped


def _text(raw: str | None) -> str | None:
    # vLLM stringifies Python's None into the label.
    if raw is None or raw.strip() in ("", "None"):
        return None
    return raw.strip()


def _float(raw: str | None) -> float | None:
    text = _text(raw)
    if text is None:
        return None
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None
