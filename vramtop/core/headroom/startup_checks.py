"""vLLM's startup checks, in one place: what vLLM refuses to start with, in its own words.

vLLM (0.29-0.33) refuses a start, in this order, when

1. the device's free memory is less than the budget it asks for (`request_memory`):
   "Free memory on device cuda:0 (…/… GiB) on startup is less than desired GPU memory
   utilization (0.95, 30.25 GiB). …";
2. the pool left inside the budget is empty: "No available memory for the cache blocks. …";
3. the pool cannot hold one request of `--max-model-len` (`check_enough_kv_cache_memory`,
   which compares memory, not the printed token count): "To serve at least one request with
   the model's max seq len (N), (X GiB KV cache is needed, which is larger than the available
   KV cache memory (Y GiB). Based on the available memory, the estimated maximum model length
   is M. …".

Every proposal vramtop makes (the remedy, the relaunch dialog, the what-if, `calc`) asks these
checks, and the simulated server refuses with them, so nothing offered is a start vLLM would
refuse. The free-memory check uses vLLM's own rule (requested ≤ free): a margin is shown as
what it is, never as a refusal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vramtop.core.budget import GIB

FREE_MEMORY = "free_memory"
NO_CACHE_BLOCKS = "no_cache_blocks"
MAX_MODEL_LEN = "max_model_len"


@dataclass(frozen=True)
class Refusal:
    """A start vLLM refuses: which check, and the message vLLM prints for it."""

    check: str  # FREE_MEMORY, NO_CACHE_BLOCKS or MAX_MODEL_LEN
    message: str
    estimated_max_model_len: int | None = None  # MAX_MODEL_LEN: the longest that fits


def free_memory_message(free: int, total: int, util: float, budget: int, device: str) -> str:
    return (
        f"Free memory on device {device} ({free / GIB:.2f}/{total / GIB:.2f} GiB) on startup "
        f"is less than desired GPU memory utilization ({util}, {budget / GIB:.2f} GiB). "
        "Decrease GPU memory utilization or reduce GPU memory used by other processes."
    )


NO_CACHE_BLOCKS_MESSAGE = (
    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
    "initializing the engine."
)


def max_model_len_message(
    max_model_len: int, needed: int, available: int, estimated: int | None
) -> str:
    estimate = (
        f"Based on the available memory, the estimated maximum model length is {estimated}. "
        if estimated
        else ""
    )
    return (
        f"To serve at least one request with the model's max seq len ({max_model_len}), "
        f"({needed / GIB:.2f} GiB KV cache is needed, which is larger than the available KV "
        f"cache memory ({available / GIB:.2f} GiB). {estimate}Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
    )


def free_memory_refusal(
    free: int, total: int, util: float, budget: int, device: str = "cuda:0"
) -> Refusal | None:
    """Check 1: vLLM asks for its budget from the memory free when it starts."""
    if free >= budget:
        return None
    return Refusal(FREE_MEMORY, free_memory_message(free, total, util, budget, device))


def pool_refusal(
    kv_cache_bytes: int,
    num_blocks: int,
    max_model_len: int,
    request_bytes: Callable[[int], int],
) -> Refusal | None:
    """Checks 2 and 3: the pool holds a block, and one request of `max_model_len`
    (`request_bytes(n)`: the memory a request of n tokens needs)."""
    if kv_cache_bytes <= 0 or num_blocks < 1:
        return Refusal(NO_CACHE_BLOCKS, NO_CACHE_BLOCKS_MESSAGE)
    needed = request_bytes(max_model_len)
    if needed <= kv_cache_bytes:
        return None
    estimated = longest_that_fits(kv_cache_bytes, max_model_len, request_bytes)
    return Refusal(
        MAX_MODEL_LEN,
        max_model_len_message(max_model_len, needed, kv_cache_bytes, estimated),
        estimated,
    )


def longest_that_fits(
    kv_cache_bytes: int, max_model_len: int, request_bytes: Callable[[int], int]
) -> int:
    """The longest request (at most `max_model_len`) whose memory fits in the pool, found by
    bisection as vLLM's `estimate_max_model_len` finds it; 0 when not one token fits."""
    low, high = 0, max_model_len
    while low < high:
        mid = (low + high + 1) // 2
        if request_bytes(mid) <= kv_cache_bytes:
            low = mid
        else:
            high = mid - 1
    return low


# --- a --max-model-len that fits -------------------------------------------------------------

# Round figures a person would type: the largest multiple of the first step the length is at
# least twice (163,840 = 5 × 32,768; 40,960 = 5 × 8,192).
_ROUND_STEPS = (32_768, 8_192, 1_024, 256, 16)


def round_model_len(tokens: int) -> int:
    """`tokens` rounded down to a figure a person would type."""
    for step in _ROUND_STEPS:
        if tokens >= 2 * step:
            return tokens // step * step
    return tokens
