"""A finding's value: its kind, the numbers that show it, what rules out the rest, what to do.

Kinds are a fixed vocabulary (see the session format); `Diagnoser` (in `diagnosis`) opens and
closes findings, and each kind's module says what one contains.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

VRAM_CONTENTION = "vram_contention"
KV_PRESSURE = "kv_pressure"
GPU_THROTTLING = "gpu_throttling"
STARTUP_OUT_OF_MEMORY = "startup_out_of_memory"
SERVER_CRASHED = "server_crashed"
SERVER_NOT_ANSWERING = "server_not_answering"
KINDS = (
    VRAM_CONTENTION,
    KV_PRESSURE,
    GPU_THROTTLING,
    STARTUP_OUT_OF_MEMORY,
    SERVER_CRASHED,
    SERVER_NOT_ANSWERING,
)
# What each kind means, in words: the console's headline (the kind stays the id in JSON).
HEADLINES = {
    VRAM_CONTENTION: "The desktop is squeezing vLLM's memory",
    KV_PRESSURE: "The KV cache is too small for this load",
    GPU_THROTTLING: "The GPU is slowing its clocks down",
    STARTUP_OUT_OF_MEMORY: "vLLM ran out of memory while starting",
    SERVER_CRASHED: "vLLM went down without being asked to",
    SERVER_NOT_ANSWERING: "vLLM is running but answers nothing",
}


def headline(kind: str) -> str:
    """The kind in words; an unknown kind (a newer recording) reads as its id."""
    return HEADLINES.get(kind, kind.replace("_", " "))


@dataclass(frozen=True)
class Finding:
    """One diagnosis, open (closed_t None) or closed. Numbers in `evidence` are raw units."""

    kind: str
    severity: str  # "critical" or "warning"
    first_seen_t: float
    last_seen_t: float
    closed_t: float | None
    summary: str  # one sentence
    evidence: Mapping[str, Any] = field(default_factory=dict)
    ruled_out: Mapping[str, Any] = field(default_factory=dict)
    # observed / inferred / hypothesis: lists of sentences, as the field report's ladder.
    ladder: Mapping[str, Sequence[str]] = field(default_factory=dict)
    remedy: Mapping[str, Any] = field(default_factory=dict)
    # How sure the finding is, when it is less sure than its kind usually is (e.g. "memory
    # evidence, no normal rate"); None: the usual certainty. Written to JSON only when set.
    confidence: str | None = None

    @property
    def is_open(self) -> bool:
        return self.closed_t is None

    @property
    def duration_s(self) -> float | None:
        """How long it held: None while still open."""
        return None if self.closed_t is None else self.closed_t - self.first_seen_t

    def to_json(self) -> dict[str, Any]:
        """The `findings[]` entry of `vramtop diagnose --json` (extra keys are additive)."""
        extra = {"confidence": self.confidence} if self.confidence is not None else {}
        return {
            "kind": self.kind,
            "severity": self.severity,
            "first_seen_t": self.first_seen_t,
            "last_seen_t": self.last_seen_t,
            "closed_t": self.closed_t,
            "duration_s": self.duration_s,
            "summary": self.summary,
            "evidence": dict(self.evidence),
            "ruled_out": dict(self.ruled_out),
            "ladder": {k: list(v) for k, v in self.ladder.items()},
            "remedy": dict(self.remedy),
            **extra,
        }


@dataclass(frozen=True)
class FindingChange:
    """A finding opened or closed since the last `take_changes()`."""

    change: str  # "opened" or "closed"
    finding: Finding
