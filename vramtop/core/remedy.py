"""What to do about a finding, typed: the action, the flags, and what they cost the KV pool.

`FlagChange` is a relaunch's flags, one value from whoever asks (the headroom dialog, `vramtop
relaunch`, the guard, a finding's remedy) to the command line it is written into
(`argv_changes`, the one place that names vLLM's flags); `RelaunchOrder` carries it with how
the relaunch is to be done.

Each kind's report builds a `Remedy` directly; `to_json` writes the session format's `remedy`
object (`diagnose --json`, recordings, the exporter) and `from_json` reads one back from a
recording, where a value of the wrong kind reads as unknown. `vramtop.core.findings`
re-exports these names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from vramtop.core.json_types import JsonObject, JsonValue
from vramtop.core.vllm import args as vllm_args


@dataclass(frozen=True)
class FlagChange:
    """A relaunch's flags: the budget and, where they change, --max-model-len and the KV
    cache dtype (None: kept as the running server has it)."""

    budget: float | None = None
    max_model_len: int | None = None
    kv_cache_dtype: str | None = None

    @property
    def empty(self) -> bool:
        """Nothing changes."""
        return self.budget is None and self.max_model_len is None and self.kv_cache_dtype is None

    def argv_changes(self) -> dict[str, str]:
        """vLLM's flags and the values this change writes into a command line, in order."""
        out: dict[str, str] = {}
        if self.budget is not None:
            out[vllm_args.GPU_MEMORY_UTILIZATION] = f"{self.budget:g}"
        if self.max_model_len is not None:
            out[vllm_args.MAX_MODEL_LEN] = str(self.max_model_len)
        if self.kv_cache_dtype is not None:
            out[vllm_args.KV_CACHE_DTYPE] = self.kv_cache_dtype
        return out

    def applied_to(self, argv: Sequence[str]) -> list[str]:
        """`argv` with this change written into it (each flag once, where it was; the rest of
        the command as it is)."""
        out = list(argv)
        for flag, value in self.argv_changes().items():
            out = vllm_args.set_flag(out, flag, value)
        return out

    def to_json(self) -> JsonObject:
        """The flags that change, as the timeline's events name them (the budget as
        `gpu_memory_utilization`)."""
        out: JsonObject = {}
        if self.budget is not None:
            out["gpu_memory_utilization"] = self.budget
        if self.max_model_len is not None:
            out["max_model_len"] = self.max_model_len
        if self.kv_cache_dtype is not None:
            out["kv_cache_dtype"] = self.kv_cache_dtype
        return out

    def words(self) -> str:
        """`0.83 with --max-model-len 98,304`, `0.83`, or `--kv-cache-dtype fp8`."""
        others = []
        if self.max_model_len is not None:
            others.append(f"{vllm_args.MAX_MODEL_LEN} {self.max_model_len:,}")
        if self.kv_cache_dtype is not None:
            others.append(f"{vllm_args.KV_CACHE_DTYPE} {self.kv_cache_dtype}")
        if self.budget is None:
            return ", ".join(others)
        said = f"{self.budget:.2f}"
        return f"{said} with {', '.join(others)}" if others else said


# Asked with a relaunch's flags before the running server is stopped: a sentence refuses the
# relaunch (the server keeps serving), None lets it go ahead.
RelaunchPrecheck = Callable[[FlagChange], str | None]


@dataclass(frozen=True)
class RelaunchOrder:
    """A relaunch as asked, one value from whoever asks (the console's dialog, the guard,
    `vramtop relaunch`) to the relaunch that writes its flags into the command line: the
    flags (`change`); whether the change goes into the profile's file once the new server
    serves (`save`); whether to wait for it to serve, and how long (None: the supervisor's
    own wait); and the check that may refuse it before the running server is stopped (None:
    the machine's own check, where it has one)."""

    change: FlagChange
    save: bool = False
    wait_ready: bool = True
    timeout_s: float | None = None
    precheck: RelaunchPrecheck | None = None


class RemedyAction(StrEnum):
    """What a remedy proposes (the session format's `remedy.action`)."""

    RELAUNCH = "relaunch"
    RESTART = "restart"
    COOL_DOWN = "cool_down"
    FIX_PROFILE = "fix_profile"


@dataclass(frozen=True)
class KvCost:
    """What another budget does to the KV pool, in raw units: the budget's change, and where
    the pool (and vLLM's token count) is known, the pool before and after."""

    budget_change_bytes: int | None
    kv_pool_bytes: int | None = None
    kv_pool_bytes_after: int | None = None
    kv_pool_loss_fraction: float | None = None
    kv_cache_tokens: int | None = None
    kv_cache_tokens_after: int | None = None

    def to_json(self, *, pool: bool = True) -> JsonObject:
        """The figures that are known, in the session format's order (`pool`: with the pool's
        two sizes, which a `Remedy` writes among its own fields)."""
        out: JsonObject = {}
        if self.budget_change_bytes is not None:
            out["budget_change_bytes"] = self.budget_change_bytes
        if self.kv_pool_bytes is not None and pool:
            out["kv_pool_bytes"] = self.kv_pool_bytes
            out["kv_pool_bytes_after"] = self.kv_pool_bytes_after
        if self.kv_pool_loss_fraction is not None:
            out["kv_pool_loss_fraction"] = self.kv_pool_loss_fraction
        if self.kv_cache_tokens is not None:
            out["kv_cache_tokens"] = self.kv_cache_tokens
            out["kv_cache_tokens_after"] = self.kv_cache_tokens_after
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, JsonValue]) -> KvCost | None:
        """The cost's figures among a remedy's (or an option's) keys; None: it has none."""
        if not any(k in obj for k in _COST_KEYS):
            return None
        return cls(
            _whole(obj.get("budget_change_bytes")),
            _whole(obj.get("kv_pool_bytes")),
            _whole(obj.get("kv_pool_bytes_after")),
            _number(obj.get("kv_pool_loss_fraction")),
            _whole(obj.get("kv_cache_tokens")),
            _whole(obj.get("kv_cache_tokens_after")),
        )


_COST_KEYS = ("budget_change_bytes", "kv_pool_loss_fraction", "kv_cache_tokens")


@dataclass(frozen=True)
class RelaunchFigures:
    """Why a relaunch's budget was chosen, in raw units: what it leaves the desktop against
    the desktop's peak, the margin and the demand it could not show, its growth."""

    desktop_headroom_bytes: int
    desktop_peak_bytes: int
    desktop_margin_bytes: int
    unseen_desktop_demand_bytes: int
    desktop_growth_bytes_per_s: int
    desktop_still_growing: bool
    current_gpu_memory_utilization: float | None
    leaves_desktop_peak: bool

    def to_json(self) -> JsonObject:
        return {
            "desktop_headroom_bytes": self.desktop_headroom_bytes,
            "desktop_peak_bytes": self.desktop_peak_bytes,
            "desktop_margin_bytes": self.desktop_margin_bytes,
            "unseen_desktop_demand_bytes": self.unseen_desktop_demand_bytes,
            "desktop_growth_bytes_per_s": self.desktop_growth_bytes_per_s,
            "desktop_still_growing": self.desktop_still_growing,
            "current_gpu_memory_utilization": self.current_gpu_memory_utilization,
            "leaves_desktop_peak": self.leaves_desktop_peak,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, JsonValue]) -> RelaunchFigures | None:
        figures = [_whole(obj.get(k)) for k in _RELAUNCH_BYTES]
        growing, leaves = obj.get("desktop_still_growing"), obj.get("leaves_desktop_peak")
        if any(f is None for f in figures) or not isinstance(growing, bool):
            return None
        if not isinstance(leaves, bool):
            return None
        headroom, peak, margin, unseen, growth = (int(f or 0) for f in figures)
        current = _number(obj.get("current_gpu_memory_utilization"))
        return cls(headroom, peak, margin, unseen, growth, growing, current, leaves)


_RELAUNCH_BYTES = (
    "desktop_headroom_bytes",
    "desktop_peak_bytes",
    "desktop_margin_bytes",
    "unseen_desktop_demand_bytes",
    "desktop_growth_bytes_per_s",
)


@dataclass(frozen=True)
class RemedyOption:
    """One flag that would help (a KV-pressure remedy lists several): its value (None: no
    value can be proposed), why, what it costs the KV pool (`cost`), other raw figures."""

    flag: str
    value: JsonValue = None
    why: str | None = None
    extra: Mapping[str, JsonValue] = field(default_factory=dict)
    cost: KvCost | None = None

    @property
    def details(self) -> JsonObject:
        """Every raw figure but the flag, its value and why, as JSON writes them."""
        return {**(self.cost.to_json() if self.cost is not None else {}), **self.extra}

    @classmethod
    def from_json(cls, obj: Mapping[str, JsonValue]) -> RemedyOption:
        cost = KvCost.from_json(obj)
        known = ("flag", "value", "why", *(cost.to_json() if cost is not None else ()))
        rest = {k: v for k, v in obj.items() if k not in known}
        why = obj.get("why")
        return cls(
            str(obj.get("flag", "")),
            obj.get("value"),
            why if isinstance(why, str) else None,
            rest,
            cost,
        )

    def to_json(self) -> JsonObject:
        out: JsonObject = {"flag": self.flag, "value": self.value, **self.details}
        if self.why is not None:
            out["why"] = self.why
        return out


# The remedy's keys that have a field of their own; every other key is a raw figure (bytes,
# fractions) kept in `extra` and written back as it came.
_REMEDY_FIELDS = (
    "action",
    "gpu_memory_utilization",
    "max_model_len",
    "current_max_model_len",
    "why",
    "restart_fails",
    "kv_pool_bytes",
    "kv_pool_bytes_after",
    "options",
)


@dataclass(frozen=True)
class Remedy:
    """What to do about a finding.

    `action`: a `RemedyAction` (None: nothing to propose); `budget`: the budget a relaunch
    should use, when one is proposed (`gpu_memory_utilization` in JSON); `max_model_len`: the
    --max-model-len it needs with it, where the current one (`current_max_model_len`) no
    longer fits in that budget's pool (vLLM would refuse the start); None: keep the current
    one; `restart_fails`: a restart at the same budget would fail the same way (a start that
    ran out of memory), so none is offered; `kv_pool_bytes(_after)`: the KV pool now and at
    the proposed budget; `relaunch`: why that budget; `cost`: what it costs the pool;
    `options`: flags that would each help; `extra`: other figures in raw units, written to
    JSON as they are; `details`: every figure without a field of its own, as JSON has them.
    """

    action: RemedyAction | str | None = None
    budget: float | None = None
    max_model_len: int | None = None
    why: str | None = None
    restart_fails: bool = False
    kv_pool_bytes: int | None = None
    kv_pool_bytes_after: int | None = None
    options: tuple[RemedyOption, ...] = ()
    extra: Mapping[str, JsonValue] = field(default_factory=dict)
    relaunch: RelaunchFigures | None = None
    cost: KvCost | None = None
    current_max_model_len: int | None = None

    @property
    def change(self) -> FlagChange:
        """The flags a relaunch with this remedy uses (empty: it proposes none)."""
        return FlagChange(self.budget, self.max_model_len)

    @property
    def leaves_desktop_peak(self) -> bool:
        """The budget leaves the desktop its peak (True where the remedy does not say)."""
        if self.relaunch is not None:
            return self.relaunch.leaves_desktop_peak
        return self.extra.get("leaves_desktop_peak") is not False

    @property
    def details(self) -> JsonObject:
        """The figures without a field of their own (the relaunch's, the cost's but the pool's
        two sizes, `extra`), as JSON writes them, in order."""
        out: JsonObject = {}
        if self.relaunch is not None:
            out.update(self.relaunch.to_json())
        if self.max_model_len is not None and (
            self.relaunch is not None or self.current_max_model_len is not None
        ):
            out["current_max_model_len"] = self.current_max_model_len
        if self.cost is not None:
            out.update(self.cost.to_json(pool=False))
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, JsonValue] | None) -> Remedy:
        """From a recording's `remedy` object; values of the wrong kind read as unknown."""
        obj = obj or {}
        action, why = obj.get("action"), obj.get("why")
        options = obj.get("options")
        relaunch, cost = RelaunchFigures.from_json(obj), KvCost.from_json(obj)
        typed = {
            *_REMEDY_FIELDS,
            *(relaunch.to_json() if relaunch is not None else ()),
            *(cost.to_json() if cost is not None else ()),
        }
        known = {a.value: a for a in RemedyAction}
        return cls(
            action=known.get(action, action) if isinstance(action, str) else None,
            budget=_number(obj.get("gpu_memory_utilization")),
            max_model_len=_length(obj.get("max_model_len")),
            why=why if isinstance(why, str) else None,
            restart_fails=obj.get("restart_fails") is True,
            kv_pool_bytes=_whole(obj.get("kv_pool_bytes")),
            kv_pool_bytes_after=_whole(obj.get("kv_pool_bytes_after")),
            options=tuple(
                RemedyOption.from_json(o)
                for o in (options if isinstance(options, list | tuple) else ())
                if isinstance(o, Mapping)
            ),
            extra={k: v for k, v in obj.items() if k not in typed},
            relaunch=relaunch,
            cost=cost,
            current_max_model_len=_length(obj.get("current_max_model_len")),
        )

    def to_json(self) -> JsonObject:
        """The `remedy` object of the session format and `diagnose --json` (keys that are
        unknown are left out)."""
        out: JsonObject = {}
        if self.action is not None:
            out["action"] = self.action
        if self.budget is not None:
            out["gpu_memory_utilization"] = self.budget
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


def _number(value: JsonValue) -> float | None:
    """A JSON number as a float; None for anything else (a bool is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _whole(value: JsonValue) -> int | None:
    """A JSON number as a whole number of bytes or tokens; None for anything else."""
    number = _number(value)
    return int(number) if number is not None else None


def _length(value: JsonValue) -> int | None:
    """A token count: a positive whole JSON number; None for anything else."""
    number = _number(value)
    if number is None or not number.is_integer() or not 1 <= number <= 2**31:
        return None
    return int(number)
