"""What the last run of a vLLM startup log says: its facts and the settings it ran with.

A log file often holds several starts (a failed one, then the good one): only the last is
read. Its settings come from the "non-default args" line and the engine's config line, so
`calc --from-log` needs no flags the log already answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vramtop.core.budget import is_cpu_server
from vramtop.core.model import StartupFacts
from vramtop.core.vllm import log as vllm_log

DEFAULT_BLOCK_SIZE = {"gpu": 16, "cpu": 128}  # vLLM's when --block-size is not given


@dataclass(frozen=True)
class LogRun:
    """What the last run of a startup log says: its facts and the settings it ran with."""

    facts: StartupFacts
    args: dict[str, Any]  # "non-default args"
    config: dict[str, str]  # a few values of the engine's config line
    cpu_kv_gib: float | None

    @property
    def device(self) -> str:
        if is_cpu_server(self.facts.device_kind) or self.config.get("device_config") == "cpu":
            return "cpu"
        return "gpu"

    @property
    def util(self) -> float | None:
        if self.facts.requested_util is not None:
            return self.facts.requested_util
        value = self.args.get("gpu_memory_utilization")
        return float(value) if isinstance(value, int | float) else None

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


def _positive_int(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def read_run(lines: Sequence[str]) -> LogRun:
    """The log's last run (see `vllm_log.last_run`)."""
    run = vllm_log.last_run(lines)
    return LogRun(
        facts=vllm_log.parse_startup(run),
        args=vllm_log.non_default_args(run),
        config=vllm_log.engine_config(run),
        cpu_kv_gib=vllm_log.cpu_kv_cache_gib(run),
    )
