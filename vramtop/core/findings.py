"""A finding's value: its kind, the numbers that show it, what rules out the rest, what to do.

Kinds are a fixed vocabulary (see the session format); the `Diagnoser` (`diagnosis.diagnoser`)
opens and closes findings, and each kind's module in `diagnosis` builds its `Report`: typed
evidence (a `Facts` dataclass of its own), what is ruled out, the ladder and the `Remedy`.
JSON is made only at the edge, by the `to_json` methods (recordings, `--json`, the exporter).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import ClassVar

from vramtop.core.json_types import JsonObject, JsonValue
from vramtop.core.remedy import KvCost, RelaunchFigures, Remedy, RemedyAction, RemedyOption


class Kind(StrEnum):
    """The kinds of finding (the session format's `kind`): equal to their ids as strings."""

    VRAM_CONTENTION = "vram_contention"
    KV_PRESSURE = "kv_pressure"
    GPU_THROTTLING = "gpu_throttling"
    STARTUP_OUT_OF_MEMORY = "startup_out_of_memory"
    SERVER_CRASHED = "server_crashed"
    SERVER_NOT_ANSWERING = "server_not_answering"
    # Added: a slowdown short of a collapse while the desktop squeezes the card (a warning).
    VRAM_SLOWDOWN = "vram_slowdown"
    # Added: the launch command itself could not run (not found, not executable): vLLM never
    # started, so neither a restart nor another budget can help; the profile needs fixing.
    LAUNCH_FAILED = "launch_failed"


class Severity(StrEnum):
    CRITICAL = "critical"
    WARNING = "warning"


class Change(StrEnum):
    """What happened to a finding since the last `take_changes()`."""

    OPENED = "opened"
    CLOSED = "closed"


# The kinds by their old names: the tests, the benches and the console name them so.
VRAM_CONTENTION = Kind.VRAM_CONTENTION
KV_PRESSURE = Kind.KV_PRESSURE
GPU_THROTTLING = Kind.GPU_THROTTLING
STARTUP_OUT_OF_MEMORY = Kind.STARTUP_OUT_OF_MEMORY
SERVER_CRASHED = Kind.SERVER_CRASHED
SERVER_NOT_ANSWERING = Kind.SERVER_NOT_ANSWERING
VRAM_SLOWDOWN = Kind.VRAM_SLOWDOWN
LAUNCH_FAILED = Kind.LAUNCH_FAILED
KINDS = tuple(Kind)
# The kinds whose rule refreshes their numbers on each sample while they hold (the others tell
# an event: a crash, a failed start). One of these may be held open without a refresh (a
# squeeze that eased, no request running): numbers older than STALE_NUMBERS_S are told as old.
MEASURED_KINDS = (VRAM_CONTENTION, VRAM_SLOWDOWN, KV_PRESSURE, GPU_THROTTLING, SERVER_NOT_ANSWERING)
STALE_NUMBERS_S = 3.0
# What each kind means, in words: the console's headline (the kind stays the id in JSON).
HEADLINES: dict[str, str] = {
    Kind.VRAM_CONTENTION: "The desktop is squeezing vLLM's memory",
    Kind.KV_PRESSURE: "The KV pool is too small for this load",
    Kind.GPU_THROTTLING: "The GPU is slowing its clocks down",
    Kind.STARTUP_OUT_OF_MEMORY: "vLLM ran out of memory while starting",
    Kind.SERVER_CRASHED: "vLLM went down without being asked to",
    Kind.SERVER_NOT_ANSWERING: "vLLM is running but answers nothing",
    Kind.VRAM_SLOWDOWN: "The desktop's memory is slowing vLLM down",
    Kind.LAUNCH_FAILED: "vLLM never started: its launch command could not run",
}

__all__ = [
    "KINDS",
    "Change",
    "Evidence",
    "Facts",
    "Finding",
    "FindingChange",
    "Kind",
    "KvCost",
    "Ladder",
    "RelaunchFigures",
    "Remedy",
    "RemedyAction",
    "RemedyOption",
    "Report",
    "RuledOut",
    "Severity",
    "headline",
    "report_fields",
]


def finding_id(finding: Finding) -> str:
    """Which finding this is, across ticks and processes: its kind and when it was first
    seen (the console, the guard and the runner match findings by it)."""
    return f"{finding.kind}@{finding.first_seen_t:.3f}"


def headline(kind: str) -> str:
    """The kind in words; an unknown kind (a newer recording) reads as its id."""
    return HEADLINES.get(kind, kind.replace("_", " "))


@dataclass(frozen=True)
class Facts:
    """The base of each kind's typed evidence: a frozen dataclass whose fields are the
    evidence's keys, in the order the session format writes them. A kind whose evidence
    cites more (a spill) adds it in its own `to_json`."""

    def to_json(self) -> JsonObject:
        return {
            f.name: _whole(getattr(self, f.name))
            if f.metadata.get("count")
            else getattr(self, f.name)
            for f in fields(self)
            if f.metadata.get("json", True)
        }


# A `Facts` field that counts (requests, preemptions), `field(metadata=COUNT)`: written as a
# whole number, `2` not `2.0`, as `--once` writes them (vLLM's metrics page gives every
# number as a float).
COUNT: Mapping[str, bool] = {"count": True}


def _whole(value: JsonValue) -> JsonValue:
    return int(value) if isinstance(value, float) and value.is_integer() else value


class Evidence(Mapping[str, JsonValue]):
    """The numbers that show a finding, by name, in raw units (bytes, seconds, ratios).

    A read-only mapping over the evidence's JSON, the same for a finding built here and one
    read back; `facts` is the kind's typed evidence where the diagnosis built it (None when
    read from JSON). What the console and the exporters read has a property here.
    """

    __slots__ = ("_values", "facts")

    def __init__(
        self, values: Mapping[str, JsonValue] | None = None, facts: Facts | None = None
    ) -> None:
        self._values: JsonObject = dict(values or {})
        self.facts = facts

    @classmethod
    def of(cls, facts: Facts) -> Evidence:
        return cls(facts.to_json(), facts)

    def __getitem__(self, name: str) -> JsonValue:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    def __hash__(self) -> int:
        return hash(tuple(self._values))

    def __repr__(self) -> str:
        return f"Evidence({self._values!r})"

    @property
    def spill_rise_bytes(self) -> int | None:
        """How far the WSL VM's shared GPU memory rose while the desktop took VRAM: the
        spill, observed on the Windows side (None: none was measured)."""
        value = _number(self._values.get("wsl_vm_shared_rise_bytes"))
        return int(value) if value is not None else None

    def to_json(self) -> JsonObject:
        return dict(self._values)


@dataclass(frozen=True)
class RuledOut:
    """Another cause and why it does not explain the finding, with the figures that show it
    (written before `why`, in order)."""

    why: str
    figures: Mapping[str, JsonValue] = field(default_factory=dict)

    def to_json(self) -> JsonObject:
        return {**self.figures, "why": self.why}


@dataclass(frozen=True)
class Ladder:
    """The field report's ladder: what was measured, what follows from it, what is only
    suspected; each rung a list of sentences."""

    observed: tuple[str, ...] = ()
    inferred: tuple[str, ...] = ()
    hypothesis: tuple[str, ...] = ()

    RUNGS: ClassVar[tuple[str, ...]] = ("observed", "inferred", "hypothesis")

    @classmethod
    def from_json(cls, obj: Mapping[str, JsonValue] | None) -> Ladder:
        """From `{"observed": [...], ...}`; a rung given as one string is one sentence."""
        rungs = obj or {}
        return cls(*(_sentences(rungs.get(name)) for name in cls.RUNGS))

    def rungs(self) -> list[tuple[str, tuple[str, ...]]]:
        """The rungs that say something, in order, with their sentences."""
        return [(name, getattr(self, name)) for name in self.RUNGS if getattr(self, name)]

    def to_json(self) -> dict[str, list[str]]:
        """Every rung (an empty list where it says nothing); `{}` for no ladder at all."""
        if not self.rungs():
            return {}
        return {name: list(getattr(self, name)) for name in self.RUNGS}


def _number(value: JsonValue) -> float | None:
    """A JSON number as a float; None for anything else (a bool is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _sentences(rung: JsonValue) -> tuple[str, ...]:
    if isinstance(rung, str):
        return (rung,)
    if isinstance(rung, list | tuple):
        return tuple(str(sentence) for sentence in rung)
    return ()


@dataclass(frozen=True)
class Report:
    """What a kind's rule says when it opens (or refreshes) its finding: everything of the
    `Finding` but its kind and times."""

    severity: Severity
    summary: str
    evidence: Evidence
    ladder: Ladder
    remedy: Remedy
    ruled_out: Mapping[str, RuledOut] = field(default_factory=dict)
    confidence: str | None = None


@dataclass(frozen=True)
class Finding:
    """One diagnosis, open (closed_t None) or closed. Numbers in `evidence` are raw units."""

    kind: Kind | str  # a Kind; a newer recording's unknown kind stays its id
    severity: Severity | str
    first_seen_t: float
    last_seen_t: float
    closed_t: float | None
    summary: str  # one sentence
    evidence: Evidence = field(default_factory=Evidence)
    ruled_out: Mapping[str, RuledOut] = field(default_factory=dict)
    ladder: Ladder = field(default_factory=Ladder)
    remedy: Remedy = field(default_factory=Remedy)
    # How sure the finding is, when it is less sure than its kind usually is (e.g. "memory
    # evidence, no normal rate"); None: the usual certainty. Written to JSON only when set.
    confidence: str | None = None

    @classmethod
    def opened(cls, kind: Kind | str, t: float, report: Report) -> Finding:
        """The finding `report` opens at `t`."""
        return cls(
            kind,
            report.severity,
            t,
            t,
            None,
            report.summary,
            report.evidence,
            report.ruled_out,
            report.ladder,
            report.remedy,
            report.confidence,
        )

    def refreshed(self, t: float, report: Report) -> Finding:
        """This open finding with `report`'s newer numbers, last seen at `t`."""
        return replace(Finding.opened(self.kind, t, report), first_seen_t=self.first_seen_t)

    @property
    def is_open(self) -> bool:
        return self.closed_t is None

    def numbers_age_s(self, t: float) -> float | None:
        """How old this open finding's numbers are at `t`, when older than `STALE_NUMBERS_S`:
        a rule may hold a finding open without refreshing it (the squeeze eased, the finding
        not yet closed), and its words then tell what held, not what holds. None while they
        are fresh, or once it closed."""
        if not self.is_open or self.kind not in MEASURED_KINDS:
            return None
        age = t - self.last_seen_t
        return age if age >= STALE_NUMBERS_S else None

    @property
    def duration_s(self) -> float | None:
        """How long it held: None while still open."""
        return None if self.closed_t is None else self.closed_t - self.first_seen_t

    def to_json(self) -> JsonObject:
        """The `findings[]` entry of `vramtop diagnose --json` (extra keys are additive)."""
        extra: JsonObject = {"confidence": self.confidence} if self.confidence is not None else {}
        return {
            "kind": self.kind,
            "severity": self.severity,
            "first_seen_t": self.first_seen_t,
            "last_seen_t": self.last_seen_t,
            "closed_t": self.closed_t,
            "duration_s": self.duration_s,
            "summary": self.summary,
            "evidence": self.evidence.to_json(),
            "ruled_out": {name: r.to_json() for name, r in self.ruled_out.items()},
            "ladder": self.ladder.to_json(),
            "remedy": self.remedy.to_json(),
            **extra,
        }


def report_fields(report: Report | Mapping[str, JsonValue]) -> dict[str, object]:
    """A kind's report as `Finding` fields (to open a finding, or refresh an open one); a
    report read from JSON (a recording's finding) gives the fields it has, parsed."""
    if not isinstance(report, Report):
        return _parsed_fields(report)
    return {
        "severity": report.severity,
        "summary": report.summary,
        "evidence": report.evidence,
        "ruled_out": report.ruled_out,
        "ladder": report.ladder,
        "remedy": report.remedy,
        "confidence": report.confidence,
    }


def _parsed_fields(obj: Mapping[str, JsonValue]) -> dict[str, object]:
    out: dict[str, object] = {k: v for k, v in obj.items() if k in _PLAIN_FIELDS}
    evidence, ladder, remedy = obj.get("evidence"), obj.get("ladder"), obj.get("remedy")
    ruled_out = obj.get("ruled_out")
    if isinstance(evidence, Mapping):
        out["evidence"] = Evidence(evidence)
    if isinstance(ruled_out, Mapping):
        out["ruled_out"] = {
            name: RuledOut(str(r.get("why", "")), {k: v for k, v in r.items() if k != "why"})
            for name, r in ruled_out.items()
            if isinstance(r, Mapping)
        }
    if "ladder" in obj:
        out["ladder"] = Ladder.from_json(ladder if isinstance(ladder, Mapping) else None)
    if "remedy" in obj:
        out["remedy"] = Remedy.from_json(remedy if isinstance(remedy, Mapping) else None)
    return out


_PLAIN_FIELDS = ("severity", "summary", "confidence")


@dataclass(frozen=True)
class FindingChange:
    """A finding opened or closed since the last `take_changes()`."""

    change: Change
    finding: Finding
