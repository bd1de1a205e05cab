"""`vramtop calc`'s options, read once from the command line (see commands/shared_options.py):
the names are the flags' (`--total-gib` is `total_gib`), None where a flag was not given."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from vramtop.commands.shared_options import Given

DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192


@dataclass(frozen=True)
class CalcOptions:
    # The card and the budgets.
    total_gib: float | None = None
    budgets: tuple[float, ...] = ()  # --util / --budget, repeated
    outside_budget_gib: float | None = None
    for_headroom_gib: float | None = None
    for_kv_tokens: int | None = None
    # Memory terms, and where they are read from.
    weights_gib: float | None = None
    non_torch_gib: float | None = None
    activation_gib: float | None = None
    cudagraph_gib: float | None = None
    model_dir: Path | None = None
    from_log: Path | None = None
    log_util: float | None = None
    # The model and vLLM's settings.
    model_config: Path | None = None
    layers: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    vocab_size: int | None = None
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS
    dtype: str | None = None
    kv_cache_dtype: str | None = None
    block_size: int | None = None
    max_model_len: int | None = None
    tensor_parallel_size: int | None = None
    enforce_eager: bool = False
    vllm_version: str | None = None
    json: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CalcOptions:
        given = Given(args)
        batched = given.whole("max_num_batched_tokens")
        return cls(
            total_gib=given.number("total_gib"),
            budgets=given.numbers("util"),
            outside_budget_gib=given.number("outside_budget_gib"),
            for_headroom_gib=given.number("for_headroom_gib"),
            for_kv_tokens=given.whole("for_kv_tokens"),
            weights_gib=given.number("weights_gib"),
            non_torch_gib=given.number("non_torch_gib"),
            activation_gib=given.number("activation_gib"),
            cudagraph_gib=given.number("cudagraph_gib"),
            model_dir=given.path("model_dir"),
            from_log=given.path("from_log"),
            log_util=given.number("log_util"),
            model_config=given.path("model_config"),
            layers=given.whole("layers"),
            kv_heads=given.whole("kv_heads"),
            head_dim=given.whole("head_dim"),
            vocab_size=given.whole("vocab_size"),
            max_num_batched_tokens=DEFAULT_MAX_NUM_BATCHED_TOKENS if batched is None else batched,
            dtype=given.text("dtype"),
            kv_cache_dtype=given.text("kv_cache_dtype"),
            block_size=given.whole("block_size"),
            max_model_len=given.whole("max_model_len"),
            tensor_parallel_size=given.whole("tensor_parallel_size"),
            enforce_eager=given.flag("enforce_eager"),
            vllm_version=given.text("vllm_version"),
            json=given.flag("json"),
        )
