"""Reading the boxes of `vramtop fleet`: one GET of each exporter's /metrics, each with its
own short timeout, all at once, so that a box that is slow or gone never delays the others.

Read-only: a GET of the metrics page is all the fleet ever sends to a box.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from email.utils import parsedate_to_datetime

import httpx

from vramtop.core.fleet_rows import Fetched
from vramtop.core.fleet_sources import Box

# Seconds one box gets to answer: the exporter answers from memory in milliseconds, so a
# box past this is down or unreachable (and the others' rows never wait for it).
TIMEOUT_S = 1.5
MAX_PAGE_BYTES = 1024 * 1024  # a vramtop page is a few KB: anything far bigger is not one


def http_client() -> httpx.Client:
    """The client a fleet reads its boxes with, made once and shared by every box and every
    refresh: making one costs ~40 ms of CPU (its TLS context), which once per box a second
    was most of the fleet console's CPU (bench/bench_fleet.py). It follows no redirect."""
    return httpx.Client(timeout=TIMEOUT_S, follow_redirects=False)


@contextmanager
def client_or(client: httpx.Client | None) -> Iterator[httpx.Client]:
    """`client`, or one of its own for this call, closed after it."""
    if client is not None:
        yield client
        return
    with http_client() as own:
        yield own


def fetch(
    box: Box,
    *,
    timeout_s: float = TIMEOUT_S,
    clock: Callable[[], float] = time.time,
    client: httpx.Client | None = None,
) -> Fetched:
    """One box's page, or why there is none; `query_time` is when the answer came."""
    try:
        with client_or(client) as http:
            answer = http.get(box.url, timeout=timeout_s)
        text: str | None = None
        error: str | None = None
        box_time = _date(answer.headers.get("date"))
        if answer.status_code != 200:
            error = f"HTTP {answer.status_code}"
        elif len(answer.content) > MAX_PAGE_BYTES:
            error = "the answer is too large to be a vramtop page"
        else:
            text = answer.text
    except httpx.TimeoutException:
        text, error, box_time = None, f"no answer within {timeout_s:g} s", None
    except httpx.HTTPError as exc:
        text, error, box_time = None, reason(exc), None
    return Fetched(box.name, box.url, clock(), text=text, error=error, box_time=box_time)


def fetch_all(
    boxes: Sequence[Box], *, timeout_s: float = TIMEOUT_S, clock: Callable[[], float] = time.time
) -> list[Fetched]:
    """Every box's page, fetched at the same time, in the boxes' order."""
    if not boxes:
        return []
    with (
        http_client() as client,
        ThreadPoolExecutor(max_workers=len(boxes), thread_name_prefix="vramtop-fleet") as pool,
    ):
        return list(
            pool.map(lambda box: fetch(box, timeout_s=timeout_s, clock=clock, client=client), boxes)
        )


def _date(header: str | None) -> float | None:
    """An HTTP Date header as Unix time; None when absent or unreadable."""
    if not header:
        return None
    try:
        return parsedate_to_datetime(header).timestamp()
    except (TypeError, ValueError, IndexError):
        return None


def reason(exc: httpx.HTTPError) -> str:
    if isinstance(exc, httpx.ConnectError):
        return "no answer (refused or unreachable)"
    return str(exc) or type(exc).__name__
