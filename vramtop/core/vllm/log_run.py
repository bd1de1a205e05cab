"""What the last run of a vLLM startup log says: its facts and the settings it ran with.

A log file often holds several starts (a failed one, then the good one): only the last is
read. Its settings come from the "non-default args" line and the engine's config line, so
`calc --from-log` needs no flags the log already answers.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from vramtop.core.bounds import whole_number
from vramtop.core.budget import is_cpu_server
from vramtop.core.json_types import JsonObject
from vramtop.core.model import StartupFacts
from vramtop.core.vllm import log as vllm_log

DEFAULT_BLOCK_SIZE = {"gpu": 16, "cpu": 128}  # vLLM's when --block-size is not given


@dataclass(frozen=True)
class LogRun:
    """What the last run of a startup log says: its facts and the settings it ran with."""

    facts: StartupFacts
    args: JsonObject  # "non-default args"
    config: dict[str, str]  # a few values of the engine's config line
    cpu_kv_gib: float | None

    @property
    def device(self) -> str:
        if is_cpu_server(self.facts.device_kind) or self.config.get("device_config") == "cpu":
            return "cpu"
        return "gpu"

    @property
    def util(self) -> float | None:
        if self.facts.requested_budget is not None:
            return self.facts.requested_budget
        value = self.args.get("gpu_memory_utilization")
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        number = float(value) if abs(value) < 1e300 else math.inf
        return number if math.isfinite(number) else None

    @property
    def pool_known(self) -> bool:
        return self.facts.available_kv_gib is not None and bool(self.facts.kv_cache_tokens)

    @property
    def block_size(self) -> int | None:
        value = self.args.get("block_size", self.config.get("block_size"))
        return _positive_int(value)

    @property
    def kv_cache_dtype(self) -> str | None:
        value = self.args.get("kv_cache_dtype", self.config.get("kv_cache_dtype"))
        return str(value) if value else None

    @property
    def served_dtype(self) -> str | None:
        """The dtype vLLM served in: its resolved config (a float32 checkpoint is downcast
        unless --dtype float32 was given), else the --dtype it was given."""
        value = self.config.get("dtype") or self.args.get("dtype")
        return str(value).removeprefix("torch.") if value else None

    @property
    def tensor_parallel_size(self) -> int | None:
        return _positive_int(
            self.args.get("tensor_parallel_size", self.config.get("tensor_parallel_size"))
        )

    @property
    def max_model_len(self) -> int | None:
        return _positive_int(self.args.get("max_model_len", self.config.get("max_seq_len")))

    @property
    def enforce_eager(self) -> bool:
        return self.args.get("enforce_eager") is True or self.config.get("enforce_eager") == "True"


def _positive_int(value: object) -> int | None:
    """A setting's whole number above 0 (as printed: 8192, '8192', 8192.0); None for anything
    else, also 1e400 and a 40-digit integer: no setting vLLM prints is that large."""
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 15:
        value = int(value)
    number = whole_number(value)
    return number if number is not None and 0 < number <= 2**40 else None


# --- a whole log file: its runs, their settings ------------------------------------------------

# Lines a server prints once per start, before anything else: a second one begins a new run.
_RUN_MARKERS: tuple[re.Pattern[str], ...] = (
    vllm_log.VERSION_LINES[0],
    vllm_log.VERSION_LINES[1],
    re.compile(r"non-default args: \{"),
)
_NON_DEFAULT_ARGS = re.compile(r"non-default args: (\{.*\})\s*$")
_ENGINE_CONFIG = re.compile(r"Initializing an? (?:V1 )?LLM engine .*? with config: ")
_CONFIG_VALUE = re.compile(
    r"\b(dtype|kv_cache_dtype|device_config|tensor_parallel_size|block_size"
    r"|max_seq_len|enforce_eager)=([\w.]+)"
)
_CPU_KV_SPACE = re.compile(
    rf"Explicitly set \(({vllm_log.NUMBER})/({vllm_log.NUMBER})\) GiB for KV cache"
)


def last_run(lines: Sequence[str]) -> list[str]:
    """The lines of the log's last server start: a log appended to by several starts (a
    failed one, then a good one) describes the last one only by its tail."""
    run = LastRun()
    for line in lines:
        run.feed(line)
    return run.lines


class LastRun:
    """A log's last run, fed one line at a time (a log of any length read in bounded
    memory): a second marker of one kind begins a new run. Of a run, the first `max_lines`
    lines and `max_chars` characters are kept: its startup, which is all that is read of it
    (a long-running server's requests follow)."""

    def __init__(self, max_lines: int | None = None, max_chars: int | None = None) -> None:
        self.lines: list[str] = []
        self._seen: set[int] = set()
        self._chars = 0
        self._max_lines = max_lines
        self._max_chars = max_chars

    def feed(self, line: str) -> None:
        text = vllm_log.strip_prefix(line)
        for kind, pattern in enumerate(_RUN_MARKERS):
            if pattern.search(text):
                if kind in self._seen:
                    self.lines, self._seen, self._chars = [], set(), 0
                self._seen.add(kind)
                break
        if self._max_lines is not None and len(self.lines) >= self._max_lines:
            return
        if self._max_chars is not None and self._chars + len(line) > self._max_chars:
            return
        self.lines.append(line)
        self._chars += len(line)


def non_default_args(lines: Iterable[str]) -> JsonObject:
    """vLLM's "non-default args: {…}" line as a dict (the last one: its last run's); {} when
    there is none or it cannot be read."""
    found: JsonObject = {}
    for line in lines:
        match = _NON_DEFAULT_ARGS.search(vllm_log.strip_prefix(line))
        if match is None:
            continue
        try:
            value = ast.literal_eval(match.group(1))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(value, dict):
            found = {str(k): v for k, v in value.items()}
    return found


def engine_config(lines: Iterable[str]) -> dict[str, str]:
    """A few values of the engine's "Initializing a V1 LLM engine … with config:" line:
    dtype, kv_cache_dtype, device_config, tensor_parallel_size, max_seq_len, enforce_eager."""
    for line in lines:
        text = vllm_log.strip_prefix(line)
        match = _ENGINE_CONFIG.search(text)
        if match is not None:
            rest = text[match.end() :]
            return {k: v for k, v in _CONFIG_VALUE.findall(rest)}
    return {}


def cpu_kv_cache_gib(lines: Iterable[str]) -> float | None:
    """The CPU build's pool: "Explicitly set (1.0/12.96) GiB for KV cache on node 0" (the
    VLLM_CPU_KVCACHE_SPACE it was given); None when not printed."""
    for line in lines:
        match = _CPU_KV_SPACE.search(line)
        if match is not None:
            return vllm_log.to_float(match.group(1))
    return None


def read_run(lines: Sequence[str]) -> LogRun:
    """The log's last run (see `last_run`)."""
    run = last_run(lines)
    return LogRun(
        facts=vllm_log.parse_startup(run),
        args=non_default_args(run),
        config=engine_config(run),
        cpu_kv_gib=cpu_kv_cache_gib(run),
    )
