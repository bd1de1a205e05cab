"""Limits for the values vramtop takes from outside (arguments, files, fields typed in the
console): one place that says what a usable number, name or line is, and what is wrong with
one that is not, in words a person can act on.

Every limit is far beyond what a real server, card or model has, and small enough that every
sum and product vramtop makes of such values stays a finite float and a list it builds stays
small. Pure: no I/O.
"""

from __future__ import annotations

import math
from typing import Any

# The longest --max-model-len taken: beyond any model's context (the longest are ~10M tokens).
MAX_MODEL_LEN = 2**26
# A model config's counts (layers, heads, head size, vocabulary, ...): beyond any checkpoint's.
MAX_CONFIG_COUNT = 2**24
# The longest a line vramtop reads from a file or a pipe may be before the rest of it is
# skipped (a session sample, a startup log line, a PowerShell reading are a few KB).
MAX_LINE_BYTES = 1 << 20
# Seconds between samples: at least a tenth of a second, at most an hour.
MIN_INTERVAL_S = 0.1
MAX_INTERVAL_S = 3600.0
# A small file read whole (a theme, a model config, a safetensors index).
MAX_SMALL_FILE_BYTES = 16 << 20

# vLLM's --kv-cache-dtype choices (vllm/config/cache.py, CacheDType, 0.29-0.33).
KV_CACHE_DTYPES: tuple[str, ...] = (
    "auto",
    "bfloat16",
    "float16",
    "fp8",
    "fp8_ds_mla",
    "fp8_e4m3",
    "fp8_e5m2",
    "fp8_inc",
)


def shown(text: str, limit: int = 40) -> str:
    """`text` as a message quotes it: repr'd, and cut to `limit` characters."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "…"


def cut(text: str, limit: int = 80) -> str:
    """`text` as a message quotes it as written (a part of a script): cut to `limit`
    characters, so that one line of input cannot make a message of megabytes."""
    return text if len(text) <= limit else text[:limit] + "…"


def whole_number(value: Any) -> int | None:
    """`value` as a whole number (a JSON or TOML integer, or a float with no fraction); None
    for anything else: booleans, NaN, infinities, fractions, and integers past 2**53 whose
    float would not be exact."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        value = int(value)
    return value if abs(value) <= 2**53 else None


def model_len_problem(value: int) -> str | None:
    """What is wrong with `value` as a --max-model-len (None: nothing)."""
    if value < 1:
        return f"must be at least 1 token (got {value:,})"
    if value > MAX_MODEL_LEN:
        return f"must be at most {MAX_MODEL_LEN:,} tokens (got {value:,})"
    return None


def parse_model_len(text: str) -> tuple[int | None, str | None]:
    """A typed --max-model-len: (the value, None) or (None, what is wrong with it)."""
    stripped = text.strip().replace(",", "").replace("_", "")
    if len(stripped) > 12 or not stripped.lstrip("-").isdigit() or not stripped.isascii():
        return None, f"a whole number of tokens such as 32768 (got {shown(text)})"
    value = int(stripped)
    problem = model_len_problem(value)
    return (None, problem) if problem else (value, None)


def kv_cache_dtype_problem(text: str) -> str | None:
    """What is wrong with `text` as a --kv-cache-dtype (None: one of vLLM's choices)."""
    if text in KV_CACHE_DTYPES:
        return None
    return f"{shown(text)} is not one of vLLM's KV cache dtypes ({', '.join(KV_CACHE_DTYPES)})"


def interval_problem(seconds: float) -> str | None:
    """What is wrong with `seconds` as the interval between samples (None: nothing)."""
    if not math.isfinite(seconds) or seconds < MIN_INTERVAL_S:
        return f"must be at least {MIN_INTERVAL_S} seconds"
    if seconds > MAX_INTERVAL_S:
        return f"must be at most {MAX_INTERVAL_S:g} seconds (an hour)"
    return None


def budget_problem(value: float) -> str | None:
    """What is wrong with `value` as a budget (--gpu-memory-utilization); None: nothing."""
    if not math.isfinite(value) or not 0 < value <= 1:
        return "the budget is a share of the card: above 0, at most 1"
    return None
