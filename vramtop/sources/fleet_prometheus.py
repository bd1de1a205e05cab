"""Reading the fleet through a Prometheus server: the instant queries of
`core.fleet_queries.QUERIES` on its HTTP API (`/api/v1/query`), all evaluated at the same
time, with one timeout.

Read-only: GETs of the query API are all the fleet ever sends.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, fields

import httpx

from vramtop.core.fleet_queries import QUERIES, Answers, result_of, rows_from
from vramtop.core.fleet_rows import BoxRow, Page
from vramtop.core.json_types import JsonValue
from vramtop.core.secrets import mask_url
from vramtop.sources.fleet_client import MAX_PAGE_BYTES, TIMEOUT_S, client_or, reason


@dataclass(frozen=True)
class Read:
    """One refresh through Prometheus: a row per box (and its page where it is up), or why
    Prometheus gave none (`error`, and no row: its boxes are not known then)."""

    query_time: float
    rows: tuple[tuple[BoxRow, Page | None], ...] = ()
    error: str | None = None


def api_base(url: str) -> str:
    """The server's base URL, whatever of its own paths was given (`/graph`, `/api/v1/…`)."""
    for tail in ("/api/v1/query", "/api/v1", "/graph", "/"):
        if url.endswith(tail):
            return url[: -len(tail)]
    return url


def read(
    url: str,
    *,
    timeout_s: float = TIMEOUT_S,
    clock: Callable[[], float] = time.time,
    client: httpx.Client | None = None,
) -> Read:
    """Every box Prometheus knows, as of now."""
    query_time = clock()
    base = api_base(url)
    answers: dict[str, list[JsonValue]] = {}
    try:
        with client_or(client) as http:
            for one in fields(QUERIES):
                answer = http.get(
                    f"{base}/api/v1/query",
                    params={"query": getattr(QUERIES, one.name), "time": f"{query_time:.3f}"},
                    timeout=timeout_s,
                )
                if answer.status_code != 200 and answer.status_code != 400:
                    return Read(query_time, error=f"Prometheus answered HTTP {answer.status_code}")
                if len(answer.content) > MAX_PAGE_BYTES * 16:
                    return Read(query_time, error="Prometheus's answer is too large")
                answers[one.name] = result_of(answer.json())
    except httpx.TimeoutException:
        return Read(query_time, error=f"Prometheus did not answer within {timeout_s:g} s")
    except httpx.HTTPError as exc:
        return Read(query_time, error=f"Prometheus: {reason(exc)}")
    except ValueError as exc:  # not JSON, or not the answer of an instant query
        return Read(query_time, error=f"Prometheus at {mask_url(base)}: {exc}")
    rows = rows_from(Answers(**answers), url=mask_url(base), query_time=query_time)
    return Read(query_time, rows=tuple(rows))
