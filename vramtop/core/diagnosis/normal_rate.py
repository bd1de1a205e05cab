"""The normal decode speed of a server: what a collapse is measured against.

Decode speed is read the way prefill cannot hide it: from vLLM's per-token latency histogram
(`inter_token_latency_seconds`), whose `_count`/`_sum` deltas between two scrapes are the
tokens each running request received per second of that interval, however many prompts were
read meanwhile. Where a server has no such histogram, the per-request generation rate (the
total generation rate over the running requests) stands in for it: seconds without prefill
teach it, and seconds with prefill (which lowers it) teach a normal of their own,
`per_request_prefill`, judged only for a fall far deeper than prefill's own noise.

Per-request speed depends on how many requests share the card (each of three decodes a bit
slower than one alone), so the normal is kept in a few concurrency buckets, not one per level.
A change of concurrency is normal traffic: comparing per request, in its own bucket, never sees
one as a collapse.

A normal learned on one run can be remembered (the state directory, see
`vramtop.session.normal_store`) and handed back at the next start, so a console opened in the
middle of a collapse compares with the speed it had before rather than learning the collapse as
normal. `NormalRate` is the value everyone reads: the console's header, `--once --json`,
recordings' headers and an exporter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from vramtop.core.diagnosis.rates import NormalQuantile, counter_delta
from vramtop.core.json_types import JsonObject
from vramtop.core.model import Sample, ServerMetrics
from vramtop.core.rate_figures import rate_text
from vramtop.core.vllm import args as vllm_args
from vramtop.core.vllm.metrics import tokens_per_observation

INTER_TOKEN_LATENCY = "inter_token_latency"  # 1 / mean inter-token latency of the interval
PER_REQUEST = "per_request"  # generation tokens/s over the running requests (the fallback)
# The fallback in seconds that also read a prompt (prefill lowers it): a normal of its own, so
# that under agent traffic, a prefill every second, the fallback is not blind to a collapse.
PER_REQUEST_PREFILL = "per_request_prefill"
MEASURES = (INTER_TOKEN_LATENCY, PER_REQUEST, PER_REQUEST_PREFILL)
# Lower bounds of the concurrency buckets: 1, 2–3, 4–7, 8 and more running requests.
BUCKETS = (1, 2, 4, 8)
# An interval whose histogram grew by fewer tokens says too little about decode speed.
MIN_DECODE_TOKENS = 4
# Samples a bucket needs before its normal is trusted. The latency measure is steady (it does
# not move with prefill or with requests ending mid-second), so it needs fewer.
WARMUP = {INTER_TOKEN_LATENCY: 5, PER_REQUEST: 10, PER_REQUEST_PREFILL: 10}

LEARNED = "learned"
REMEMBERED = "remembered"


def bucket(running: float) -> int:
    """The concurrency bucket (its lower bound) of `running` requests; 1 for fewer than 1."""
    return max((b for b in BUCKETS if running >= b), default=BUCKETS[0])


def decode_key(s: Sample) -> str | None:
    """What a normal rate belongs to: the profile and what decides decode speed (model, card,
    quantization, KV cache dtype, tensor parallel). Not the budget: it only sizes the KV pool,
    so a relaunch with another budget keeps the normal. None until the model is known."""
    info, server = s.info, s.server
    argv = info.argv if info is not None else ()
    try:
        model = vllm_args.find_model(argv) if argv else None
        quantization = vllm_args.get_flag(argv, "--quantization") if argv else None
        tp = vllm_args.get_flag(argv, "--tensor-parallel-size") if argv else None
        kv_dtype = vllm_args.kv_cache_dtype(argv) if argv else None
    except ValueError:  # an argv vLLM itself would refuse: no key rather than a wrong one
        return None
    if model is None and server is not None:
        model = server.served_model or (server.metrics.model_name if server.metrics else None)
    if model is None:
        return None
    card = s.gpu.devices[0].name if s.gpu.devices else None
    parts = {
        "profile": info.profile if info is not None else None,
        "model": model,
        "card": card,
        "quantization": quantization,
        "kv_cache_dtype": kv_dtype or (info.kv_cache_dtype if info is not None else None),
        "tensor_parallel": tp or "1",
    }
    return "|".join(f"{k}={v or '-'}" for k, v in parts.items())


def decode_tps(previous: ServerMetrics | None, current: ServerMetrics | None) -> float | None:
    """Tokens per second per running request between two scrapes, from the latency histogram
    (None when a scrape lacks it, when it reset, or when too few tokens were decoded). With
    speculative decoding an observation carries several tokens: `tokens_per_observation`."""
    if previous is None or current is None:
        return None
    tokens = counter_delta(previous.inter_token_latency_count, current.inter_token_latency_count)
    seconds = counter_delta(previous.inter_token_latency_sum_s, current.inter_token_latency_sum_s)
    if tokens is None or seconds is None or tokens < MIN_DECODE_TOKENS or seconds <= 0:
        return None
    return tokens / seconds * tokens_per_observation(previous, current)


@dataclass(frozen=True)
class NormalRate:
    """A server's normal decode speed per request, by measure and concurrency bucket.

    `source` says where it came from: `learned` on this run, or `remembered` from an earlier
    one (then `saved_at`, wall-clock epoch seconds, says when it was last learned).
    """

    by_measure: Mapping[str, Mapping[int, float]]
    source: str = LEARNED
    saved_at: float | None = None
    key: str | None = None
    """What the rate belongs to (profile and what decides decode speed), see `decode_key`."""

    @property
    def measure(self) -> str | None:
        """The measure the headline figure is in (the latency one when known)."""
        return next((m for m in MEASURES if self.by_measure.get(m)), None)

    @property
    def tps(self) -> float | None:
        """The headline figure: per-request tokens/s at the lowest concurrency known."""
        measure = self.measure
        if measure is None:
            return None
        buckets = self.by_measure[measure]
        return buckets[min(buckets)]

    def for_running(self, running: float, measure: str | None = None) -> float | None:
        """The normal per-request rate for `running` requests (its bucket's, else the slowest
        bucket known: comparing with a slower normal can only miss, never invent, a fall)."""
        buckets = self.by_measure.get(measure or self.measure or "", {})
        if not buckets:
            return None
        own = buckets.get(bucket(running))
        return own if own is not None else min(buckets.values())

    def expected_generation_tps(self, running: float) -> float | None:
        """The total generation rate `running` requests normally reach (one when idle)."""
        per_request = self.for_running(max(1.0, running))
        return None if per_request is None else per_request * max(1.0, running)

    def age_s(self, now: float) -> float | None:
        """Seconds since a remembered rate was saved (`now`: wall-clock epoch seconds)."""
        return None if self.saved_at is None else max(0.0, now - self.saved_at)

    def describe(self, now: float) -> str:
        """'normal 77 tok/s (learned now)' or 'normal 77 tok/s (remembered from 2 h ago)'."""
        tps = self.tps
        figure = "normal —" if tps is None else f"normal {rate_text(tps)} tok/s"
        age = self.age_s(now)
        if self.source == REMEMBERED and age is not None:
            return f"{figure} (remembered from {ago(age)})"
        return f"{figure} ({'learned now' if self.source == LEARNED else self.source})"

    def to_json(self) -> JsonObject:
        return {
            "tps": None if self.tps is None else round(self.tps, 2),
            "measure": self.measure,
            "source": self.source,
            "saved_at": self.saved_at,
            "key": self.key,
            "by_measure": {
                m: {str(b): round(v, 3) for b, v in sorted(buckets.items())}
                for m, buckets in self.by_measure.items()
                if buckets
            },
        }

    @staticmethod
    def from_json(obj: object, source: str = REMEMBERED) -> NormalRate | None:
        """Read a `to_json` value back (None for anything unusable: a normal rate is an
        optional help, a damaged one is ignored)."""
        if not isinstance(obj, Mapping) or not isinstance(obj.get("by_measure"), Mapping):
            return None
        by_measure: dict[str, dict[int, float]] = {}
        for measure, buckets in obj["by_measure"].items():
            if measure not in MEASURES or not isinstance(buckets, Mapping):
                continue
            read: dict[int, float] = {}
            for b, v in buckets.items():
                try:
                    low, rate = int(b), float(v)
                except (TypeError, ValueError):
                    continue
                if low in BUCKETS and rate > 0 and rate == rate and rate != float("inf"):
                    read[low] = rate
            if read:
                by_measure[measure] = read
        if not by_measure:
            return None
        saved = obj.get("saved_at")
        key = obj.get("key")
        return NormalRate(
            by_measure=by_measure,
            source=source,
            saved_at=float(saved) if isinstance(saved, int | float) else None,
            key=key if isinstance(key, str) else None,
        )


def ago(seconds: float) -> str:
    """'just now', '5 min ago', '2 h ago', '3 days ago'."""
    if seconds < 90:
        return "just now" if seconds < 30 else "1 min ago"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.0f} h ago"
    return f"{seconds / 86400:.0f} days ago"


@dataclass
class NormalRateLearner:
    """Learns the normal per measure and bucket; a remembered rate fills the buckets not yet
    learned (and is dropped by `forget_remembered` when it proves wrong)."""

    remembered: NormalRate | None = None
    _learned: dict[tuple[str, int], NormalQuantile] = field(default_factory=dict)

    def reference(self, measure: str, running: float) -> float | None:
        """What a rate in `measure` with `running` requests is compared with (None: nothing
        known yet). A learned bucket wins over a remembered one."""
        learned = self.learned_rate()
        for known in (learned, self.remembered):
            if known is not None and known.by_measure.get(measure, {}).get(bucket(running)):
                return known.for_running(running, measure)
        merged = [
            v
            for known in (learned, self.remembered)
            if known is not None
            for v in known.by_measure.get(measure, {}).values()
        ]
        return min(merged) if merged else None

    def ratio(self, measure: str, running: float, rate: float) -> float | None:
        base = self.reference(measure, running)
        return None if base is None or base <= 0 else rate / base

    def add(self, measure: str, running: float, rate: float) -> None:
        key = (measure, bucket(running))
        if key not in self._learned:
            self._learned[key] = NormalQuantile(warmup=WARMUP[measure])
        self._learned[key].add(rate)

    def forget_remembered(self) -> None:
        self.remembered = None

    def learned_rate(self) -> NormalRate | None:
        by_measure: dict[str, dict[int, float]] = {}
        for (measure, low), quantile in self._learned.items():
            value = quantile.value
            if value is not None and value > 0:
                by_measure.setdefault(measure, {})[low] = value
        return NormalRate(by_measure=by_measure, source=LEARNED) if by_measure else None

    def current(self, key: str | None = None) -> NormalRate | None:
        """The normal as it stands: learned buckets, and remembered ones where none was
        learned. Its source is `learned` once any bucket was learned on this run."""
        learned, remembered = self.learned_rate(), self.remembered
        if learned is None and remembered is None:
            return None
        if learned is None:
            return remembered
        if remembered is None:
            return NormalRate(learned.by_measure, LEARNED, key=key)
        merged = {m: dict(b) for m, b in remembered.by_measure.items()}
        for measure, buckets in learned.by_measure.items():
            merged.setdefault(measure, {}).update(buckets)
        return NormalRate(merged, LEARNED, key=key or remembered.key)
