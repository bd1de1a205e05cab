"""Reads a vLLM server over HTTP into a `ServerReading`: /metrics every tick (the samples
vramtop reads alone, where the server gives them: `metrics_page.py`), /health every few ticks
while all is well (every tick otherwise), /version and /v1/models once per server start.
Blocking, one request after another over one kept-alive connection (see `server_client.py`),
each request done within the timeout as a whole. Never raises: failures are readings with a
reason.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import replace

from vramtop.core.diagnosis.thresholds import NOT_ANSWERING_S
from vramtop.core.json_types import JsonObject
from vramtop.core.model import ServerMetrics, ServerReading
from vramtop.core.secrets import mask_url
from vramtop.core.vllm.metrics import MAX_NAME_CHARS, parse_metrics, shown_text
from vramtop.sources.http_answer import Answer, ConnectFailed, Result
from vramtop.sources.metrics_page import MetricsPage
from vramtop.sources.server_client import MAX_BODY_BYTES, ServerClient

log = logging.getLogger(__name__)

_METRICS, _HEALTH, _VERSION, _MODELS = "/metrics", "/health", "/version", "/v1/models"
# After a failed /version or /v1/models, ask again only this many reads later: a server that
# refuses our key would otherwise be asked every tick.
_INFO_RETRY_READS = 30
# While /metrics answers 200 and the last /health did too, /health is asked on every this many
# reads only, the health in between carried over from the last answer: a GET is a good part of
# a tick's CPU. This is safe because vLLM's /health only adds "the engine is alive" to what a
# 200 from /metrics already says (the API server answers), and in vLLM V1 a dead engine takes
# the API server down shortly after, which the next /metrics sees at once. Any other answer
# has /health asked on every read again.
_HEALTH_EVERY_READS = 5
# Every vLLM metric's name starts with this; a /metrics page with none is another program's.
_VLLM_METRIC = "vllm:"
# The longest model length /v1/models can mean (the longest contexts are ~10^7 tokens): a
# larger, negative or non-integer one is not vLLM's and is dropped.
MAX_MODEL_LEN = 2**31
MAX_VERSION_CHARS = 64  # vLLM's are like "0.32.1.dev12+g1234abcd.cpu"


def normalise_url(url: str) -> str:
    url = url.strip().rstrip("/")
    return url if "://" in url else f"http://{url}"


class Scraper:
    """One vLLM server's HTTP endpoints. Keeps the last good reading to show as stale when a
    read fails, and what it learnt once per server start (version, model, max_model_len)."""

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        timeout_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`clock`: what `metrics_read_at` is told in (the sampler's, for its samples' `t`)."""
        # Shown in readings and messages: a password in the URL never is (vramtop sends
        # none; the host, port and path are all it uses).
        self.url = mask_url(normalise_url(url))
        self.timeout_s = float(timeout_s)
        self._api_key = api_key
        self._client = ServerClient(self.url, api_key, self.timeout_s)
        self._page = MetricsPage()  # the whole /metrics page, or the lines vramtop reads
        self._last_good: ServerReading | None = None
        self._version: str | None = None
        self._served_model: str | None = None
        self._max_model_len: int | None = None
        self._info_error: str | None = None
        # When requests began to time out (monotonic), None while the server answers.
        self._silent_since: float | None = None
        self._info_wanted = True
        self._info_retry_in = 0
        # The last /health answer's status (None: not known), and reads until the next ask.
        self._health_status: int | None = None
        self._health_in = 0
        self._skipped_lines = 0  # unreadable /metrics lines on the last page (logged on change)
        self._dropped_values = 0  # values on it vLLM cannot report (logged on change)
        self._clock = clock
        # When (by `clock`) the /metrics answer the last reading's counters come from arrived;
        # None where the last read got no page.
        self.metrics_read_at: float | None = None
        self._arrivals: dict[int, float] = {}  # id of a page's answer: when it arrived

    def _note_skipped(self, skipped: int) -> None:
        """Log lines of the /metrics page that could not be read: once when it starts (or
        the count changes), not on every scrape of the same page."""
        if skipped != self._skipped_lines and skipped:
            log.warning("%s/metrics: %d line(s) could not be read, skipped", self.url, skipped)
        self._skipped_lines = skipped

    def _note_dropped(self, dropped: int) -> None:
        """Log values of the /metrics page that vLLM cannot report (dropped, their figures
        unknown), as `_note_skipped` does unreadable lines."""
        if dropped != self._dropped_values and dropped:
            log.warning(
                "%s/metrics: %d value(s) outside what vLLM reports (or repeated series), dropped",
                self.url,
                dropped,
            )
        self._dropped_values = dropped

    # --- public API -----------------------------------------------------------------------

    def read_sync(self) -> ServerReading:
        """One scrape, blocking: for a thread worker (the monitor's, once a second)."""
        self.metrics_read_at = None
        try:
            paths = self._paths_to_fetch()
            start = time.perf_counter()
            answers: dict[str, Result] = {}
            get = self._client.get
            for path in paths:
                answer = self._page.read(self._timed_get) if path == _METRICS else get(path)
                if path == _METRICS:
                    if isinstance(answer, Answer):
                        self.metrics_read_at = self._arrivals.get(id(answer))
                    self._arrivals.clear()
                answers[path] = answer
                if not isinstance(answer, Answer):
                    # Requests run one after another: a server that did not answer one will
                    # not answer the next, and waiting again would double the stall.
                    answers.update({p: answer for p in paths if p not in answers})
                    break
            latency = time.perf_counter() - start
            return self._silence(self._reading(answers, latency), answers[paths[0]])
        except Exception as exc:  # a bug here must still not stop the console
            return self._failed(f"unexpected error while reading the server: {exc}")

    def close(self) -> None:
        """Closes the kept-alive connection; a later read opens a new one."""
        self._client.close()

    def _timed_get(self, path: str) -> Result:
        """A GET of a /metrics page, its arrival noted: a read asks for more than the page
        (/health, /version, the short page judged after the whole one), and a rate divides
        the counters' increase by the time between the pages, not between the reads' ends."""
        answer = self._client.get(path)
        self._arrivals[id(answer)] = self._clock()
        return answer

    def _paths_to_fetch(self) -> list[str]:
        """What this read asks for."""
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

    def _reading(self, answers: dict[str, Result], latency: float) -> ServerReading:
        metrics_answer = answers[_METRICS]
        if _HEALTH in answers:
            health_answer = answers[_HEALTH]
            self._health_status = (
                health_answer.status if isinstance(health_answer, Answer) else None
            )
        if not (isinstance(metrics_answer, Answer) and metrics_answer.status == 200):
            self._health_in = 0  # something is wrong: ask /health on the next read too
        if not isinstance(metrics_answer, Answer) and not isinstance(answers.get(_HEALTH), Answer):
            # The server did not answer at all: after it comes back, it may be a new start.
            # (When /health was not asked, /metrics not answering says the same.)
            self._info_wanted, self._info_retry_in = True, 0
            self._health_status = None
            self._page.forget()
            return self._failed(self._describe(metrics_answer))

        # Asked this read or carried over from the last ask (see _HEALTH_EVERY_READS).
        health_status = self._health_status
        healthy = None if health_status is None else health_status == 200
        metrics: ServerMetrics | None = None
        error: str | None = None
        if isinstance(metrics_answer, Answer) and metrics_answer.too_large:
            error = (
                f"not a vLLM server: its /metrics page is over {MAX_BODY_BYTES // 2**20} MB "
                "(vLLM's is about 50 KB)"
            )
            healthy = False
        elif isinstance(metrics_answer, Answer) and metrics_answer.status == 200:
            if _VLLM_METRIC in metrics_answer.text:
                metrics = parse_metrics(metrics_answer.text)
                self._note_skipped(metrics.skipped_lines)
                self._note_dropped(metrics.dropped_values)
            else:
                error = "not a vLLM server: its /metrics page has no vLLM metric"
                healthy = False
        elif isinstance(metrics_answer, Answer) and metrics_answer.status in (401, 403):
            error = (
                f"/metrics answered HTTP {metrics_answer.status}: the server (or a proxy "
                "before it) refuses vramtop's requests"
                + ("" if self._api_key else " without its API key (--api-key-env)")
            )
        elif isinstance(metrics_answer, Answer):
            error = f"/metrics answered HTTP {metrics_answer.status}"
        else:
            error = f"/metrics: {self._describe(metrics_answer)}"
        if healthy is False and error is None:
            error = f"/health answered HTTP {health_status}: the engine is not serving"

        if metrics is not None and self._restarted(metrics):
            self._info_wanted, self._info_retry_in = True, 0
            self._page.forget()
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

    def _silence(self, reading: ServerReading, first: Result) -> ServerReading:
        """A timeout (the connection accepted, nothing answered) again and again: how long
        the server has been silent, and past NOT_ANSWERING_S, unhealthy with the reason. A
        refusal is not silence: nothing listens, the server is down."""
        if not isinstance(first, TimeoutError):
            self._silent_since = None
            return reading
        now = time.monotonic()
        if self._silent_since is None:
            self._silent_since = now - self.timeout_s  # the request that timed out began then
        quiet = now - self._silent_since
        if quiet < NOT_ANSWERING_S:
            return replace(reading, not_answering_s=quiet)
        return replace(
            reading,
            healthy=False,
            not_answering_s=quiet,
            error=f"not answering for {quiet:.0f} s: the process holds its port but every "
            "request times out (hung or stopped)",
        )

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

    def _read_info(self, version_answer: Result, models_answer: Result) -> None:
        problems = []
        if isinstance(version_answer, Answer) and version_answer.status == 200:
            version = shown_text(_json(version_answer).get("version"), MAX_VERSION_CHARS)
            self._version = version if version is not None else self._version
        else:
            problems.append(_VERSION)
        if isinstance(models_answer, Answer) and models_answer.status == 200:
            models = _json(models_answer).get("data")
            first = models[0] if isinstance(models, list) and models else {}
            if isinstance(first, dict):
                self._served_model = shown_text(first.get("id"), MAX_NAME_CHARS)
                length = first.get("max_model_len")
                self._max_model_len = (
                    length
                    if isinstance(length, int)
                    and not isinstance(length, bool)
                    and 0 < length <= MAX_MODEL_LEN
                    else None
                )
            self._info_error = None
        elif isinstance(models_answer, Answer) and models_answer.status in (401, 403):
            problems.append(_MODELS)
            self._info_error = (
                "/v1/models refused the request (HTTP "
                f"{models_answer.status}): give vramtop the server's --api-key"
                if not self._api_key
                else f"/v1/models rejected the API key (HTTP {models_answer.status})"
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

    def _describe(self, answer: Result) -> str:
        if isinstance(answer, Answer):
            return f"HTTP {answer.status}"
        if isinstance(answer, TimeoutError):  # socket.timeout is TimeoutError
            return f"timed out after {self.timeout_s} s"
        if _refused(answer):
            return "connection refused: is the server running?"

        if isinstance(answer, ConnectFailed):
            return f"cannot connect to {self.url}: {answer}"
        return f"request failed: {str(answer) or type(answer).__name__}"


def _json(answer: Answer) -> JsonObject:
    try:
        value = json.loads(answer.text)
    except (ValueError, RecursionError):  # (nested deeper than the parser recurses)
        return {}
    return value if isinstance(value, dict) else {}


def _refused(error: BaseException) -> bool:
    """Whether a failure was a refused connection, the refusal anywhere in the cause chain."""
    seen: BaseException | None = error
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
