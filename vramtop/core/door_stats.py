"""What the front door sees of each request, as figures: time to first token, end-to-end
latency, the decode speed the client saw, and their p50/p95 over the latest requests.

Pure: every time is passed in (seconds on one monotonic clock). The door feeds each streamed
chunk to an `SseTally` as it passes and keeps the last `WINDOW` finished requests' timings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# The statistics cover this many of the latest finished generation requests.
WINDOW = 200
# An event split across chunks is kept this long at most; a longer one is not an SSE event
# the tally needs (it counts, it never forwards).
_TAIL_LIMIT = 1 << 20


@dataclass(frozen=True)
class RequestTiming:
    """One finished request as the client saw it through the door (`None`: not measured)."""

    e2e_s: float
    ttft_s: float | None = None
    decode_tps: float | None = None


@dataclass(frozen=True)
class DoorLatency:
    """p50/p95 over a window of requests; `None` where no request in it measured the figure."""

    ttft_p50_s: float | None
    ttft_p95_s: float | None
    e2e_p50_s: float | None
    e2e_p95_s: float | None
    decode_tps_p50: float | None

    def fields(self) -> dict[str, float | None]:
        return {
            "ttft_p50_s": self.ttft_p50_s,
            "ttft_p95_s": self.ttft_p95_s,
            "e2e_p50_s": self.e2e_p50_s,
            "e2e_p95_s": self.e2e_p95_s,
            "decode_tps_p50": self.decode_tps_p50,
        }


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile (0 ≤ q ≤ 1) by linear interpolation between closest ranks (numpy's
    default); `None` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * min(max(q, 0.0), 1.0)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summarize(timings: Iterable[RequestTiming]) -> DoorLatency:
    items = list(timings)
    ttft = [t.ttft_s for t in items if t.ttft_s is not None]
    e2e = [t.e2e_s for t in items]
    tps = [t.decode_tps for t in items if t.decode_tps is not None]
    return DoorLatency(
        ttft_p50_s=percentile(ttft, 0.5),
        ttft_p95_s=percentile(ttft, 0.95),
        e2e_p50_s=percentile(e2e, 0.5),
        e2e_p95_s=percentile(e2e, 0.95),
        decode_tps_p50=percentile(tps, 0.5),
    )


def is_token_event(event: bytes) -> bool:
    """Whether one SSE event (without its blank line) carries generated text: a `data:` event
    that is not `[DONE]`, not the usage chunk (no choices) and not the chat stream's opening
    role chunk. Byte tests only: no JSON is parsed per chunk."""
    if not event.startswith(b"data:"):
        return False
    if len(event) <= 16 and event[5:].strip() == b"[DONE]":
        return False
    if b'"choices":[]' in event or b'"choices": []' in event:
        return False
    return b'"role":' not in event and b'"role": ' not in event


class SseTally:
    """Counts a stream's SSE events as its chunks pass (an event may span chunks) and when the
    first and last text-bearing ones arrived."""

    __slots__ = (
        "_tail",
        "events",
        "first_chunk_tokens",
        "first_token_t",
        "last_token_t",
        "token_events",
    )

    def __init__(self) -> None:
        self._tail = b""
        self.events = 0
        self.token_events = 0
        # Text events that came in the chunk of the first: decoded before the clock started.
        self.first_chunk_tokens = 0
        self.first_token_t: float | None = None
        self.last_token_t: float | None = None

    def feed(self, chunk: bytes, now: float) -> None:
        data = self._tail + chunk if self._tail else chunk
        if b"\n\n" not in data:
            self._tail = data if len(data) <= _TAIL_LIMIT else b""
            return
        *complete, self._tail = data.split(b"\n\n")
        for event in complete:
            event = event.lstrip(b"\r\n")
            if not event:
                continue
            self.events += 1
            if is_token_event(event):
                self.token_events += 1
                if self.first_token_t is None:
                    self.first_token_t = now
                if now == self.first_token_t:
                    self.first_chunk_tokens += 1
                self.last_token_t = now

    def decode_tps(self) -> float | None:
        """Text events per second after the first chunk that carried one: those that came
        later over the time from that chunk to the last (one event is one token in vLLM's
        stream, speculative decoding aside). A server short of CPU sends several at once, so
        the first chunk's are not counted: they were decoded before the clock started.
        `None` when every text event came in one chunk."""
        first, last = self.first_token_t, self.last_token_t
        if first is None or last is None or last <= first:
            return None
        return (self.token_events - self.first_chunk_tokens) / (last - first)
