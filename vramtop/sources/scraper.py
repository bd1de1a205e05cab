"""Reads a vLLM server over HTTP into a `ServerReading`: /metrics every tick, /health every
few ticks while all is well (every tick otherwise), /version and /v1/models once per server
start. Never raises: failures are readings with a reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import replace
from typing import Any

import httpx

from vramtop.core.metrics import parse_metrics
from vramtop.core.model import ServerMetrics, ServerReading

_METRICS, _HEALTH, _VERSION, _MODELS = "/metrics", "/health", "/version", "/v1/models"
# After a failed /version or /v1/models, ask again only this many reads later: a server that
# refuses our key would otherwise be asked every tick.
_INFO_RETRY_READS = 30
# While /metrics answers 200 and the last /health did too, /health is asked on every this many
# reads only, the health in between carried over from the last answer: a GET is over a
# millisecond of CPU, a tick's largest cost. This is safe because vLLM's /health only adds
# "the engine is alive" to what a 200 from /metrics already says (the API server answers),
# and in vLLM V1 a dead engine takes the API server down shortly after, which the next
# /metrics sees at once. Any other answer has /health asked on every read again.
_HEALTH_EVERY_READS = 5

_Result = httpx.Response | Exception


def normalise_url(url: str) -> str:
    url = url.strip().rstrip("/")
    return url if "://" in url else f"http://{url}"


class Scraper:
    """One vLLM server's HTTP endpoints. Keeps the last good reading to show as stale when a
    read fails, and what it learnt once per server start (version, model, max_model_len)."""

    def __init__(self, url: str, api_key: str | None = None, timeout_s: float = 2.0) -> None:
        self.url = normalise_url(url)
        self.timeout_s = float(timeout_s)
        self._api_key = api_key
        self._async_client: httpx.AsyncClient | None = None
        self._sync_client: httpx.Client | None = None
        self._last_good: ServerReading | None = None
        self._version: str | None = None
        self._served_model: str | None = None
        self._max_model_len: int | None = None
        self._info_error: str | None = None
        self._info_wanted = True
        self._info_retry_in = 0
        # The last /health answer's status (None: not known), and reads until the next ask.
        self._health_status: int | None = None
        self._health_in = 0

    # --- public API -----------------------------------------------------------------------

    async def read(self, client: httpx.AsyncClient | None = None) -> ServerReading:
        """One scrape. Pass a client to share its connection pool; otherwise the scraper
        keeps its own (close it with `aclose`)."""
        try:
            if client is None:
                if self._async_client is None:
                    self._async_client = httpx.AsyncClient(**self._client_options())
                client = self._async_client
            paths = self._paths_to_fetch()
            start = time.perf_counter()
            answers = await asyncio.gather(*(self._aget(client, p) for p in paths))
            latency = time.perf_counter() - start
            return self._reading(dict(zip(paths, answers, strict=True)), latency)
        except Exception as exc:  # a bug here must still not stop the console
            return self._failed(f"unexpected error while reading the server: {exc}")

    def read_sync(self) -> ServerReading:
        """The same scrape with a blocking client: for thread workers, where no loop runs."""
        try:
            if self._sync_client is None:
                self._sync_client = httpx.Client(**self._client_options())
            paths = self._paths_to_fetch()
            start = time.perf_counter()
            answers: dict[str, _Result] = {}
            for path in paths:
                answer = self._get(self._sync_client, path)
                answers[path] = answer
                if isinstance(answer, httpx.TransportError):
                    # Requests run one after another here: a server that did not answer one
                    # will not answer the next, and waiting again would double the stall.
                    answers.update({p: answer for p in paths if p not in answers})
                    break
            latency = time.perf_counter() - start
            return self._reading(answers, latency)
        except Exception as exc:
            return self._failed(f"unexpected error while reading the server: {exc}")

    async def aclose(self) -> None:
        client, self._async_client = self._async_client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.aclose()
        self.close()

    def close(self) -> None:
        """Closes the blocking client used by `read_sync`."""
        client, self._sync_client = self._sync_client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()

    # --- fetching ---------------------------------------------------------------------------

    def _client_options(self) -> dict[str, Any]:
        # trust_env=False: a desktop's HTTP(S)_PROXY must not route requests for a local
        # server through a proxy that cannot reach it.
        return {"timeout": httpx.Timeout(self.timeout_s), "trust_env": False}

    def _headers(self, path: str) -> dict[str, str]:
        # vLLM's --api-key guards /v1/* only; the key is sent nowhere else.
        if self._api_key and path.startswith("/v1/"):
            return {"Authorization": f"Bearer {self._api_key}"}
        return {}

    async def _aget(self, client: httpx.AsyncClient, path: str) -> _Result:
        request = client.get(self.url + path, headers=self._headers(path), timeout=self.timeout_s)
        try:
            # httpx's timeout bounds each phase; this bounds the whole request, so a server
            # that trickles bytes cannot stall a tick either.
            return await asyncio.wait_for(request, timeout=self.timeout_s)
        except TimeoutError:
            return httpx.ReadTimeout("whole request timed out")
        except Exception as exc:
            return exc

    def _get(self, client: httpx.Client, path: str) -> _Result:
        try:
            return client.get(self.url + path, headers=self._headers(path))
        except Exception as exc:
            return exc

    def _paths_to_fetch(self) -> list[str]:
        """What this read asks for; the same choice for `read` and `read_sync`."""
        paths = [_METRICS]
        if self._health_status != 200 or self._health_in <= 0:
            paths.append(_HEALTH)
            self._health_in = _HEALTH_EVERY_READS - 1
        else:
            self._health_in -= 1
        if self._info_wanted:
            if self._info_retry_in <= 0:
                paths += [_VERSION, _MODELS]
            else:
                self._info_retry_in -= 1
        return paths

    # --- building the reading ---------------------------------------------------------------

    def _reading(self, answers: dict[str, _Result], latency: float) -> ServerReading:
        metrics_answer = answers[_METRICS]
        if _HEALTH in answers:
            health_answer = answers[_HEALTH]
            self._health_status = (
                health_answer.status_code if isinstance(health_answer, httpx.Response) else None
            )
        if not (isinstance(metrics_answer, httpx.Response) and metrics_answer.status_code == 200):
            self._health_in = 0  # something is wrong: ask /health on the next read too
        if not isinstance(metrics_answer, httpx.Response) and not isinstance(
            answers.get(_HEALTH), httpx.Response
        ):
            # The server did not answer at all: after it comes back, it may be a new start.
            # (When /health was not asked, /metrics not answering says the same.)
            self._info_wanted, self._info_retry_in = True, 0
            self._health_status = None
            return self._failed(self._describe(metrics_answer))

        # Asked this read or carried over from the last ask (see _HEALTH_EVERY_READS).
        health_status = self._health_status
        healthy = None if health_status is None else health_status == 200
        metrics: ServerMetrics | None = None
        error: str | None = None
        if isinstance(metrics_answer, httpx.Response) and metrics_answer.status_code == 200:
            metrics = parse_metrics(metrics_answer.text)
        elif isinstance(metrics_answer, httpx.Response):
            error = f"/metrics answered HTTP {metrics_answer.status_code}"
        else:
            error = f"/metrics: {self._describe(metrics_answer)}"
        if healthy is False and error is None:
            error = f"/health answered HTTP {health_status}: the engine is not serving"

        if metrics is not None and self._restarted(metrics):
            self._info_wanted, self._info_retry_in = True, 0
        if _VERSION in answers:
            self._read_info(answers[_VERSION], answers[_MODELS])

        stale = False
        if metrics is None and self._last_good is not None:
            metrics, stale = self._last_good.metrics, True
        reading = ServerReading(
            url=self.url,
            reachable=True,
            healthy=healthy,
            metrics=metrics,
            version=self._version,
            max_model_len=self._max_model_len,
            served_model=self._served_model,
            stale=stale,
            error=error or self._info_error,
            latency_s=latency,
        )
        if not stale and reading.metrics is not None:
            self._last_good = reading
        return reading

    def _restarted(self, metrics: ServerMetrics) -> bool:
        """Counters only fall when the server restarted."""
        before = self._last_good.metrics if self._last_good else None
        if before is None:
            return False
        pairs = (
            (before.generation_tokens_total, metrics.generation_tokens_total),
            (before.prompt_tokens_total, metrics.prompt_tokens_total),
        )
        return any(old is not None and new is not None and new < old for old, new in pairs)

    def _read_info(self, version_answer: _Result, models_answer: _Result) -> None:
        problems = []
        if isinstance(version_answer, httpx.Response) and version_answer.status_code == 200:
            version = _json(version_answer).get("version")
            self._version = str(version) if version is not None else self._version
        else:
            problems.append(_VERSION)
        if isinstance(models_answer, httpx.Response) and models_answer.status_code == 200:
            models = _json(models_answer).get("data")
            first = models[0] if isinstance(models, list) and models else {}
            if isinstance(first, dict):
                self._served_model = str(first["id"]) if first.get("id") else None
                length = first.get("max_model_len")
                self._max_model_len = length if isinstance(length, int) else None
            self._info_error = None
        elif isinstance(models_answer, httpx.Response) and models_answer.status_code in (401, 403):
            problems.append(_MODELS)
            self._info_error = (
                "/v1/models refused the request (HTTP "
                f"{models_answer.status_code}): give vramtop the server's --api-key"
                if not self._api_key
                else f"/v1/models rejected the API key (HTTP {models_answer.status_code})"
            )
        else:
            problems.append(_MODELS)
        self._info_wanted = bool(problems)
        self._info_retry_in = _INFO_RETRY_READS if problems else 0

    def _failed(self, error: str) -> ServerReading:
        last = self._last_good
        if last is None:
            return ServerReading(url=self.url, reachable=False, error=error)
        return replace(last, reachable=False, healthy=None, stale=True, error=error, latency_s=None)

    def _describe(self, answer: _Result) -> str:
        if isinstance(answer, httpx.TimeoutException):
            return f"timed out after {self.timeout_s} s"
        if isinstance(answer, httpx.ConnectError):
            text = str(answer)
            if _refused(answer):
                return "connection refused: is the server running?"
            return f"cannot connect to {self.url}: {text or type(answer).__name__}"
        if isinstance(answer, httpx.Response):
            return f"HTTP {answer.status_code}"
        return f"request failed: {answer or type(answer).__name__}"


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        value = response.json()
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _refused(error: BaseException) -> bool:
    """Whether a connect error was a refusal; the async transport hides the cause a level
    or two down ("All connection attempts failed")."""
    seen: BaseException | None = error
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError) or "refused" in str(seen).lower():
            return True
        seen = seen.__cause__ or seen.__context__
    return False
