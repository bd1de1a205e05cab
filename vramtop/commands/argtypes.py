"""Argument types for the command line: a number that is not one vramtop can use (NaN, an
infinity, 1e300, an integer of 400 digits) is a usage error (exit 2 with the flag named),
never an unexpected error later."""

from __future__ import annotations

import argparse
from collections.abc import Callable

# Far beyond any memory size, duration, count or budget vramtop is given, and small enough
# that every sum and product of them stays a finite float.
LIMIT = 1e12


def finite_float(text: str) -> float:
    """A number written plainly (`bounds.plain_number`: 0.85, 1e-3; not 1_0, inf, 0x1p-3)."""
    from vramtop.core.bounds import plain_number, shown

    if len(text) > 64:
        raise argparse.ArgumentTypeError(f"not a usable number: {text[:20]!r}…")
    value = plain_number(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"not a number such as 0.85 or 1e-3: {shown(text)}")
    if abs(value) > LIMIT:
        raise argparse.ArgumentTypeError(f"not a usable number: {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """A duration: a usable number of seconds, more than 0."""
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds: {text!r}")
    return value


def bounded_int(text: str) -> int:
    if len(text.strip()) > 15:
        raise argparse.ArgumentTypeError(f"not a usable whole number: {text[:20]!r}…")
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if abs(value) > LIMIT:
        raise argparse.ArgumentTypeError(f"not a usable whole number: {text!r}")
    return value


def positive_int(text: str) -> int:
    """A count (layers, heads, tokens, a block size): a whole number, at least 1."""
    value = bounded_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {value})")
    return value


def _bounded(text: str, problem: Callable[[int], str | None]) -> int:
    value = bounded_int(text)
    said = problem(value)
    if said is not None:
        raise argparse.ArgumentTypeError(said)
    return value


def model_count(text: str) -> int:
    """A model's count (layers, heads, head size, vocabulary): from 1 to what a config.json
    may hold (`bounds.MAX_CONFIG_COUNT`)."""
    from vramtop.core.bounds import MAX_CONFIG_COUNT, count_problem

    return _bounded(text, lambda n: count_problem(n, MAX_CONFIG_COUNT, ""))


def batched_tokens(text: str) -> int:
    """--max-num-batched-tokens: from 1 to `bounds.MAX_BATCHED_TOKENS`."""
    from vramtop.core.bounds import MAX_BATCHED_TOKENS, count_problem

    return _bounded(text, lambda n: count_problem(n, MAX_BATCHED_TOKENS, "tokens"))


def block_size(text: str) -> int:
    """vLLM's --block-size: 1, 8 or a multiple of 16 (`bounds.block_size_problem`)."""
    from vramtop.core.bounds import block_size_problem

    return _bounded(text, block_size_problem)


def tensor_parallel_size(text: str) -> int:
    """vLLM's --tensor-parallel-size: GPUs, 1 to `bounds.MAX_TENSOR_PARALLEL_SIZE`."""
    from vramtop.core.bounds import tensor_parallel_problem

    return _bounded(text, tensor_parallel_problem)


def count_or_zero(text: str) -> int:
    """A number of lines or items: a whole number, 0 or more."""
    value = bounded_int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more (got {value})")
    return value


def model_len(text: str) -> int:
    """A --max-model-len: tokens, from 1 up to `bounds.MAX_MODEL_LEN`."""
    from vramtop.core.bounds import parse_model_len

    value, problem = parse_model_len(text)
    if value is None:
        raise argparse.ArgumentTypeError(problem or "not a usable --max-model-len")
    return value


def kv_cache_dtype(text: str) -> str:
    """A --kv-cache-dtype vLLM takes (auto, fp8, ...)."""
    from vramtop.core.bounds import kv_cache_dtype_problem

    problem = kv_cache_dtype_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def interval_seconds(text: str) -> float:
    """Seconds between samples: from `bounds.MIN_INTERVAL_S` to `bounds.MAX_INTERVAL_S`."""
    from vramtop.core.bounds import interval_problem

    value = finite_float(text)
    problem = interval_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{problem} (got {text!r})")
    return value


def port(text: str) -> int:
    """A TCP port: 1 to 65535."""
    value = bounded_int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a port: {text!r} (a number from 1 to 65535)")
    return value


def pid(text: str) -> int:
    """A process id: a whole number from 1 (the kernel's own limit is 2**22)."""
    value = bounded_int(text)
    if not 1 <= value <= 2**22:
        raise argparse.ArgumentTypeError(f"not a process id: {text!r} (a number from 1)")
    return value


def front_door(text: str) -> str:
    """`--front-door`: a HOST:PORT for the front door, or `off` (no door)."""
    if text.strip().lower() == "off":
        return "off"
    from vramtop.config import parse_door_address  # (pydantic: only when the flag is given)

    try:
        parse_door_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, or off") from None
    return text.strip()


def server_url(text: str) -> str:
    """A vLLM server's base URL: http(s), a host, a port from 1 to 65535 where one is written
    (`core.addresses.parse_url`). The message never repeats a password written into the URL."""
    from vramtop.core.addresses import parse_url
    from vramtop.core.secrets import mask_url

    url = text.strip()
    full = url if "://" in url else f"http://{url}"
    try:
        parse_url(full)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a usable URL: {mask_url(full)!r} ({exc})") from None
    return url


def variable_name(text: str) -> str:
    """`--api-key-env`: the name of the variable that holds the key. A value that is no name,
    or that looks like a key, is refused without repeating it: it may be the key itself."""
    from vramtop.core.secrets import variable_name_problem

    problem = variable_name_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"the value given {problem}")
    return text
