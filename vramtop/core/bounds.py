"""Limits for the values vramtop takes from outside (arguments, files, fields typed in the
console): one place that says what a usable number, name or line is, and what is wrong with
one that is not, in words a person can act on.

Every limit is far beyond what a real server, card or model has, and small enough that every
sum and product vramtop makes of such values stays a finite float and a list it builds stays
small. Pure: no I/O.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping

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

# vLLM's --block-size (tokens per KV block). Releases up to late 2025 took one of 1, 8, 16, 32,
# 64, 128 (256 added later: `BlockSize` in vllm/config/cache.py); later ones take any whole
# number above 0 at first, but each attention kernel asks for a multiple of 16 (FlashAttention
# and Triton `MultipleOf(16)`, FlashInfer 16/32/64) or 1 (ROCm's AITER MLA), so 3 never
# starts. Hybrid models' own sizes are larger multiples of 16 (528, 1056); 4096 is beyond them.
MAX_BLOCK_SIZE = 4096
# vLLM's --tensor-parallel-size has no upper limit of its own (it must divide the attention
# heads and have as many GPUs). A tensor-parallel group spans GPUs joined by one NVLink
# domain, and the largest built hold a few hundred (72 in an NVL72 rack); 1024 is beyond any,
# and keeps the per-GPU figures (heads and weights divided by it) meaningful.
MAX_TENSOR_PARALLEL_SIZE = 1024
# --max-num-batched-tokens: tokens one step may batch; vLLM's defaults are 2,048-16,384.
MAX_BATCHED_TOKENS = MAX_MODEL_LEN

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


# A number as a person writes one: ASCII digits, a point, an exponent. Not what float() also
# takes: 1_0 (10), ٣ (Arabic-Indic 3), inf, nan; nor 0x1p-3, which it does not.
_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def plain_number(text: str) -> float | None:
    """`text` as a finite number written plainly (0.85, 1e-3, -2); None for anything else,
    an infinity and a number too large for a float (1e400) included."""
    stripped = text.strip()
    if len(stripped) > 64 or not _PLAIN_NUMBER.fullmatch(stripped):
        return None
    value = float(stripped)
    return value if math.isfinite(value) else None


def shown(text: str, limit: int = 40) -> str:
    """`text` as a message quotes it: repr'd, and cut to `limit` characters."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "…"


def cut(text: str, limit: int = 80) -> str:
    """`text` as a message quotes it as written (a part of a script): cut to `limit`
    characters, so that one line of input cannot make a message of megabytes."""
    return text if len(text) <= limit else text[:limit] + "…"


def whole_number(value: object) -> int | None:
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


def version_problem(data: Mapping[str, object], newest: int) -> str | None:
    """What is wrong with the format `version` of a file read as `data` (None: one this
    vramtop reads, from 1 to `newest`). Only a larger whole number is a newer format; any
    other value (text such as "1", a fraction, true, null, 0 or below, none at all) is a
    damaged file."""
    if "version" not in data:
        return "damaged: it has no format version"
    value = data["version"]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return f"damaged: its version must be a whole number from 1, got {json_shown(value)}"
    if value > newest:
        return (
            f"its format version {json_shown(value)} is newer than this vramtop reads ({newest}); "
            "update vramtop"
        )
    return None


def json_shown(value: object, limit: int = 40) -> str:
    """`value` as it was written in JSON (`"1"`, `1.5`, `true`, `null`), cut to `limit`."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(type(value))
    return text if len(text) <= limit else text[:limit] + "…"


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


def count_problem(value: int, most: int, what: str) -> str | None:
    """What is wrong with `value` as a count of `what` from 1 to `most` (None: nothing)."""
    if value < 1:
        return f"must be at least 1 (got {value:,})"
    if value > most:
        return f"must be at most {most:,}{' ' + what if what else ''} (got {value:,})"
    return None


def block_size_problem(value: int) -> str | None:
    """What is wrong with `value` as vLLM's --block-size (None: one vLLM starts with)."""
    if value < 1:
        return f"must be at least 1 (got {value:,})"
    if value in (1, 8) or (value % 16 == 0 and value <= MAX_BLOCK_SIZE):
        return None
    return (
        f"{value:,} is not a block size vLLM starts with: 1, 8, or a multiple of 16 up to "
        f"{MAX_BLOCK_SIZE:,} (16 is its default on a GPU)"
    )


def tensor_parallel_problem(value: int) -> str | None:
    """What is wrong with `value` as vLLM's --tensor-parallel-size (None: nothing)."""
    return count_problem(value, MAX_TENSOR_PARALLEL_SIZE, "GPUs")


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
    """What is wrong with `value` as a budget (--gpu-memory-utilization); None: nothing.
    vLLM takes any share above 0: one too small to hold the model is said by the prediction
    (`Prediction.kv_shortfall_bytes`), not refused here."""
    if not math.isfinite(value) or not 0 < value <= 1:
        return "the budget is a share of the card: above 0, at most 1"
    return None


def parse_budget(text: str) -> tuple[float | None, str | None]:
    """A typed budget: (the value, None) or (None, what is wrong with it)."""
    value = plain_number(text)
    if value is None:
        return None, f"the budget is a number such as 0.85 (got {shown(text)})"
    problem = budget_problem(value)
    return (None, f"{problem} (got {shown(text)})") if problem else (value, None)
