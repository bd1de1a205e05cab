"""A finding's value: its kind, the numbers that show it, what rules out the rest, what to do.

Kinds are a fixed vocabulary (see the session format); the `Diagnoser` (`diagnosis.diagnoser`)
opens and closes findings, and each kind's module in `diagnosis` says what one contains.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

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
KINDS = (
    VRAM_CONTENTION,
    KV_PRESSURE,
    GPU_THROTTLING,
    STARTUP_OUT_OF_MEMORY,
    SERVER_CRASHED,
    SERVER_NOT_ANSWERING,
    VRAM_SLOWDOWN,
    LAUNCH_FAILED,
)
# What each kind means, in words: the console's headline (the kind stays the id in JSON).
HEADLINES = {
    VRAM_CONTENTION: "The desktop is squeezing vLLM's memory",
    KV_PRESSURE: "The KV cache is too small for this load",
    GPU_THROTTLING: "The GPU is slowing its clocks down",
    STARTUP_OUT_OF_MEMORY: "vLLM ran out of memory while starting",
    SERVER_CRASHED: "vLLM went down without being asked to",
    SERVER_NOT_ANSWERING: "vLLM is running but answers nothing",
    VRAM_SLOWDOWN: "The desktop's memory is slowing vLLM down",
    LAUNCH_FAILED: "vLLM never started: its launch command could not run",
}


def headline(kind: str) -> str:
    """The kind in words; an unknown kind (a newer recording) reads as its id."""
    return HEADLINES.get(kind, kind.replace("_", " "))


class Evidence(Mapping[str, Any]):
    """The numbers that show a finding, by name, in raw units (bytes, seconds, ratios).

    Each kind's report names its own numbers (the session format leaves them open), so this
    is a read-only mapping; what the console and the exporters read has a property here.
    """

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._values: dict[str, Any] = dict(values or {})

    def __getitem__(self, name: str) -> Any:
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

    def to_json(self) -> dict[str, Any]:
        return dict(self._values)


@dataclass(frozen=True)
class Ladder:
    """The field report's ladder: what was measured, what follows from it, what is only
    suspected; each rung a list of sentences."""

    observed: tuple[str, ...] = ()
    inferred: tuple[str, ...] = ()
    hypothesis: tuple[str, ...] = ()

    RUNGS: ClassVar[tuple[str, ...]] = ("observed", "inferred", "hypothesis")

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | None) -> Ladder:
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


@dataclass(frozen=True)
class RemedyOption:
    """One flag that would help (a KV-pressure remedy lists several): its value (None: no
    value can be proposed), why, and what it costs in raw units."""

    flag: str
    value: Any = None
    why: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> RemedyOption:
        rest = {k: v for k, v in obj.items() if k not in ("flag", "value", "why")}
        why = obj.get("why")
        why = why if isinstance(why, str) else None
        return cls(str(obj.get("flag", "")), obj.get("value"), why, rest)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"flag": self.flag, "value": self.value, **self.details}
        if self.why is not None:
            out["why"] = self.why
        return out


# The remedy's keys that have a field of their own; every other key is a raw figure (bytes,
# fractions) kept in `details` and written back as it came.
_REMEDY_FIELDS = (
    "action",
    "gpu_memory_utilization",
    "max_model_len",
    "why",
    "restart_fails",
    "kv_pool_bytes",
    "kv_pool_bytes_after",
    "options",
)


@dataclass(frozen=True)
class Remedy:
    """What to do about a finding.

    `action`: "relaunch", "restart", "cool_down" (None: nothing to propose);
    `gpu_memory_utilization`: the budget a relaunch should use, when one is proposed;
    `max_model_len`: the --max-model-len it needs with it, where the current one no longer fits
    in that budget's pool (vLLM would refuse the start); None: keep the current one;
    `restart_fails`: a restart at the same budget would fail the same way (a start that ran
    out of memory), so none is offered; `kv_pool_bytes(_after)`: the KV pool now and at the
    proposed budget; `options`: flags that would each help; `details`: the kind's other
    figures in raw units, written to JSON as they are.
    """

    action: str | None = None
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    why: str | None = None
    restart_fails: bool = False
    kv_pool_bytes: int | None = None
    kv_pool_bytes_after: int | None = None
    options: tuple[RemedyOption, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | None) -> Remedy:
        """From a report's (or a recording's) `remedy` object; values of the wrong kind read
        as unknown."""
        obj = obj or {}
        action, why = obj.get("action"), obj.get("why")
        pool, after = _number(obj.get("kv_pool_bytes")), _number(obj.get("kv_pool_bytes_after"))
        options = obj.get("options")
        return cls(
            action=action if isinstance(action, str) else None,
            gpu_memory_utilization=_number(obj.get("gpu_memory_utilization")),
            max_model_len=_length(obj.get("max_model_len")),
            why=why if isinstance(why, str) else None,
            restart_fails=obj.get("restart_fails") is True,
            kv_pool_bytes=int(pool) if pool is not None else None,
            kv_pool_bytes_after=int(after) if after is not None else None,
            options=tuple(
                RemedyOption.from_json(o)
                for o in (options if isinstance(options, list | tuple) else ())
                if isinstance(o, Mapping)
            ),
            details={k: v for k, v in obj.items() if k not in _REMEDY_FIELDS},
        )

    def to_json(self) -> dict[str, Any]:
        """The `remedy` object of the session format and `diagnose --json` (keys that are
        unknown are left out)."""
        out: dict[str, Any] = {}
        if self.action is not None:
            out["action"] = self.action
        if self.gpu_memory_utilization is not None:
            out["gpu_memory_utilization"] = self.gpu_memory_utilization
        if self.max_model_len is not None:
            out["max_model_len"] = self.max_model_len
        out.update(self.details)
        if self.kv_pool_bytes is not None:
            out["kv_pool_bytes"] = self.kv_pool_bytes
        if self.kv_pool_bytes_after is not None:
            out["kv_pool_bytes_after"] = self.kv_pool_bytes_after
        if self.options:
            out["options"] = [o.to_json() for o in self.options]
        if self.restart_fails:
            out["restart_fails"] = True
        if self.why is not None:
            out["why"] = self.why
        return out


def _number(value: Any) -> float | None:
    """A JSON number as a float; None for anything else (a bool is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _length(value: Any) -> int | None:
    """A token count: a positive whole JSON number; None for anything else."""
    number = _number(value)
    if number is None or not number.is_integer() or not 1 <= number <= 2**31:
        return None
    return int(number)


def _sentences(rung: Any) -> tuple[str, ...]:
    if isinstance(rung, str):
        return (rung,)
    if isinstance(rung, list | tuple):
        return tuple(str(sentence) for sentence in rung)
    return ()


@dataclass(frozen=True)
class Finding:
    """One diagnosis, open (closed_t None) or closed. Numbers in `evidence` are raw units."""

    kind: str
    severity: str  # "critical" or "warning"
    first_seen_t: float
    last_seen_t: float
    closed_t: float | None
    summary: str  # one sentence
    evidence: Evidence = field(default_factory=Evidence)
    ruled_out: Mapping[str, Any] = field(default_factory=dict)
    ladder: Ladder = field(default_factory=Ladder)
    remedy: Remedy = field(default_factory=Remedy)
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
            "evidence": self.evidence.to_json(),
            "ruled_out": dict(self.ruled_out),
            "ladder": self.ladder.to_json(),
            "remedy": self.remedy.to_json(),
            **extra,
        }


def report_fields(report: Mapping[str, Any]) -> dict[str, Any]:
    """A kind's report (severity, summary, evidence, ruled_out, ladder, remedy, confidence:
    plain values as the report module builds them) as `Finding` fields, typed."""
    fields = dict(report)
    if "evidence" in fields:
        fields["evidence"] = Evidence(fields["evidence"])
    if "ladder" in fields:
        fields["ladder"] = Ladder.from_json(fields["ladder"])
    if "remedy" in fields:
        fields["remedy"] = Remedy.from_json(fields["remedy"])
    return fields


@dataclass(frozen=True)
class FindingChange:
    """A finding opened or closed since the last `take_changes()`."""

    change: str  # "opened" or "closed"
    finding: Finding
