"""Argument types for the command line: a number that is not one vramtop can use (NaN, an
infinity, 1e300, an integer of 400 digits) is a usage error (exit 2 with the flag named),
never an unexpected error later."""

from __future__ import annotations

import argparse
import math

# Far beyond any memory size, duration, count or budget vramtop is given, and small enough
# that every sum and product of them stays a finite float.
LIMIT = 1e12


def finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or abs(value) > LIMIT:
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


def server_url(text: str) -> str:
    """A vLLM server's base URL: http(s), a host, a port that is a number. The message never
    repeats a password written into the URL."""
    import urllib.parse

    from vramtop.core.secrets import mask_url

    url = text.strip()
    shown = mask_url(url)
    full = url if "://" in url else f"http://{url}"
    try:
        parts = urllib.parse.urlsplit(full)
        parts.port  # noqa: B018 (raises for a port that is not a number)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a usable URL: {mask_url(full)!r} ({exc})") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(
            f"not a usable URL: {shown!r} (give http://HOST:PORT, e.g. http://127.0.0.1:8000)"
        )
    return url
