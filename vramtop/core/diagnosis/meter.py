"""Each running sample measured against the normal decode speed, and the normal taught.

`RateMeter` owns the normal rate: its learner, what it belongs to (the decode key) and how
many requests ran when it was last measured. It turns two samples into a judged `Point`
(the diagnoser keeps the window of them that its rules read) and learns from the points it is
given; when a point may teach (no squeeze is open) is the diagnoser's to say.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramtop.core import sample_facts as read
from vramtop.core.diagnosis.collapse import Point
from vramtop.core.diagnosis.normal_rate import (
    INTER_TOKEN_LATENCY,
    PER_REQUEST,
    PER_REQUEST_PREFILL,
    NormalRate,
    NormalRateLearner,
    decode_key,
    decode_tps,
)
from vramtop.core.diagnosis.rates import ADMIT_RATIO, MAX_GAP_S, counter_rate
from vramtop.core.diagnosis.thresholds import (
    COLLAPSE_RATIO,
    PREFILL_COLLAPSE_RATIO,
    PREFILL_TPS,
    RECOVERED_RATIO,
)
from vramtop.core.diagnosis.throughput import SMOOTH_S
from vramtop.core.model import Sample, ServerState


class RateMeter:
    """`remembered`: a normal rate from an earlier run of the same server."""

    def __init__(self, remembered: NormalRate | None = None) -> None:
        self.normal = NormalRateLearner(remembered=remembered)
        self.key: str | None = None
        self._key_argv: tuple[str, ...] | None = None
        self.running = 1.0  # the requests running at the last interval run from end to end
        self._generated_t: float | None = None  # when an interval last generated a token

    def new_epoch(self) -> None:
        """A new server start. The normal decode speed outlives a restart or relaunch (the
        budget only sizes the KV pool): what this run learned is what the next one compares
        with at once."""
        self.normal = NormalRateLearner(remembered=self.current())

    def current(self) -> NormalRate | None:
        """The normal compared with now (learned, or remembered); None: none yet."""
        return self.normal.current(self.key)

    def reference(self, measure: str, running: float) -> float | None:
        return self.normal.reference(measure, running)

    def track_key(self, s: Sample) -> bool:
        """Follow what the normal belongs to; True when it changed to another model, card or
        dtype, whose old normal says nothing about this one (it is forgotten)."""
        argv = s.info.argv if s.info is not None else ()
        if self.key is not None and argv == self._key_argv:
            return False  # the same command line: the same key (read once, not every second)
        key = decode_key(s)
        if key is None:
            return False
        changed = self.key is not None and key != self.key
        if changed:
            self.normal = NormalRateLearner()
        self.key, self._key_argv = key, argv
        return changed

    def measure(self, prev: Sample | None, s: Sample, state: ServerState | None) -> Point | None:
        """The rates of a sample taken while requests ran (else None), judged against the
        normal (see `interval_rates` for what is measured)."""
        interval = interval_rates(prev, s, state)
        if interval is None:
            return None
        if interval.generation_tps > 0:
            self._generated_t = s.t
        elif self._generated_t is not None and s.t - self._generated_t < SMOOTH_S:
            # Requests running, none generating, tokens a moment ago: a request between
            # decodes, reading its prompt (vLLM counts a prompt's tokens once it is read).
            # No decode speed to measure, not 0/req beside the generation the screen gives
            # for the same seconds (SMOOTH_S of them). Longer, it is a stall: measured 0.
            return None
        if interval.whole:
            self.running = interval.running
        measure, rate, running = interval.measure, interval.per_request_tps, interval.running
        ratio = self.normal.ratio(measure, running, rate)
        # A second that also read a prompt decodes less, by how long the prompt was: its
        # normal is noisy, so only a fall far below prefill's own dips counts.
        line = PREFILL_COLLAPSE_RATIO if measure == PER_REQUEST_PREFILL else COLLAPSE_RATIO
        collapsed = ratio is not None and ratio < line
        at_normal = ratio is None or ratio >= RECOVERED_RATIO
        return Point(
            s.t,
            interval.generation_tps,
            rate,
            interval.prompt_tps,
            running,
            collapsed,
            at_normal,
            measure=measure,
            ratio=ratio,
            whole=interval.whole,
        )

    def learn(self, point: Point) -> None:
        """Teach the normal from `point` (the caller keeps squeezed seconds out: a long call
        would make its own slowdown normal)."""
        if point.ratio is not None and point.ratio < ADMIT_RATIO:
            return  # suspect: a collapse must not teach the normal
        if point.measure == INTER_TOKEN_LATENCY:
            self.normal.add(INTER_TOKEN_LATENCY, point.running, point.per_request_tps)
        # The fallback measure is learned too (a second whose histogram saw too few tokens is
        # judged by it), with requests running from end to end: seconds without prefill in
        # its own normal, seconds with prefill (which lowers it) in theirs.
        if not point.whole:
            return
        measure = fallback_measure(point.prompt_tps)
        per_request = point.generation_tps / max(1.0, point.running)
        ratio = self.normal.ratio(measure, point.running, per_request)
        if ratio is None or ratio >= ADMIT_RATIO:
            self.normal.add(measure, point.running, per_request)


@dataclass(frozen=True)
class Interval:
    """What one interval between two samples measured while requests ran."""

    generation_tps: float  # all running requests together
    per_request_tps: float  # decode speed per request, in `measure`
    measure: str
    prompt_tps: float | None
    running: float
    whole: bool  # requests ran at both ends of the interval (else only the latency measure)


def interval_rates(prev: Sample | None, s: Sample, state: ServerState | None) -> Interval | None:
    """The rates of the interval from `prev` to `s` while requests ran (else None): the one
    measurement of the per-request decode speed, which the rule judges and every reader
    shows. vLLM's per-token latency needs no request running at both ends: it counts only
    tokens decoded, so an interval in which a request ended or began is judged by it too (the
    per-request fallback is not: a request ending mid-interval lowers it)."""
    if state not in (ServerState.RUNNING, None) or prev is None:
        return None
    m, pm = read.metrics(s), read.metrics(prev)
    if m is None or pm is None:
        return None
    now, before = m.requests_running or 0.0, pm.requests_running or 0.0
    if not (now or before):
        return None
    whole = bool(now and before)
    dt = s.t - prev.t
    decode = decode_tps(pm, m) if dt <= MAX_GAP_S else None
    if not whole and decode is None:
        return None
    gen = counter_rate(pm.generation_tokens_total, m.generation_tokens_total, dt)
    if gen is None:
        gen = s.rates.generation_tps
    if gen is None:
        return None
    prompt = counter_rate(pm.prompt_tokens_total, m.prompt_tokens_total, dt)
    if prompt is None:
        prompt = s.rates.prompt_tps
    running = now if whole else max(now, before)
    # Per request, so that a change of concurrency is never a fall: vLLM's per-token latency
    # when it has it (prefill does not hide it), else the total over the requests.
    measure, rate = (
        (INTER_TOKEN_LATENCY, decode)
        if decode is not None
        else (fallback_measure(prompt), gen / max(1.0, running))
    )
    return Interval(gen, rate, measure, prompt, running, whole)


def fallback_measure(prompt_tps: float | None) -> str:
    """The per-request fallback's measure for a second: with prefill under way or without."""
    return (
        PER_REQUEST_PREFILL if prompt_tps is not None and prompt_tps >= PREFILL_TPS else PER_REQUEST
    )
