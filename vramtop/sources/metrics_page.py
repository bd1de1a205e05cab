"""Which /metrics page to ask a server for: the samples vramtop reads alone, where the server
is seen to give them, else the whole page.

vLLM's page is ~50 KB, of which `parse_metrics` reads a dozen lines; prometheus_client (which
vLLM serves its metrics through) writes only the samples named by `?name[]=`, ~3 KB. Making
the whole page costs the server's API process, and reading it costs the console, several
times what the short page does. vLLM 0.32 serves /metrics through a route that ignores the
query and the library's own app under /metrics/, which honours it; so the short page is asked
at /metrics/.

Not every server honours it: another exporter, a proxy or the simulator may answer 404 or the
whole page, and a registry that knows no names (prometheus_client's multiprocess mode, when
vLLM runs several API servers) may answer nothing. So a server's short page is compared with
its whole page once: the same series the parser reads, and nothing else, or the whole page is
asked from then on. Each short page after that must carry those same series, else the whole
page is asked at once and the short one judged again. What was learnt holds until the server
restarts or stops answering.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from typing import TypeGuard

from vramtop.core.vllm.metrics import SAMPLE_NAMES, only_read, series_read
from vramtop.sources.http_answer import Answer, Result

WHOLE_PAGE = "/metrics"
# Reads before a short page that got no answer when it was to be judged (a timeout, a 5xx) is
# tried again: no answer is no verdict.
RETRY_READS = 30
SHORT_PAGE = "/metrics/?" + "&".join(
    "name%5B%5D=" + urllib.parse.quote(name, safe=":") for name in SAMPLE_NAMES
)


class MetricsPage:
    """What one server is asked for, and what was learnt of its short page."""

    def __init__(self) -> None:
        # None: not tried yet; True: the short page serves; False: the whole page is asked.
        self._short: bool | None = None
        self._series: frozenset[str] = frozenset()  # the short page's series, when it serves
        self._retry_in = 0  # reads until a short page that got no answer is tried again

    @property
    def short(self) -> bool:
        """Whether the server's short page has been seen to serve (and is asked for)."""
        return bool(self._short)

    def forget(self) -> None:
        """The server may be another one now (restarted, or back after not answering): its
        short page is tried again."""
        self._short, self._series, self._retry_in = None, frozenset(), 0

    def read(self, get: Callable[[str], Result]) -> Result:
        """The answer to read, through `get` (a GET of a path): the short page where it
        serves, else the whole page; a second GET where the short page is to be judged."""
        if not self._short:
            whole = get(WHOLE_PAGE)
            if self._short is None and _read(whole) and series_read(whole.text):
                if self._retry_in > 0:
                    self._retry_in -= 1
                else:
                    self._judge(get(SHORT_PAGE), whole)
            return whole
        short = get(SHORT_PAGE)
        if not isinstance(short, Answer):
            return short  # no answer at all: the whole page would get none either
        if _read(short) and series_read(short.text) == self._series:
            return short
        # Less (or other) than the server gave before: the whole page, and a new judgement.
        whole = get(WHOLE_PAGE)
        if _read(whole):
            self._judge(short, whole)
        return whole

    def _judge(self, short: Result, whole: Answer) -> None:
        """Whether `short` serves: the same series as the whole page, and nothing else."""
        if not isinstance(short, Answer) or short.status >= 500:
            self._short, self._series, self._retry_in = None, frozenset(), RETRY_READS
            return
        series = series_read(whole.text)
        self._short = (
            _read(short)
            and bool(series)
            and series_read(short.text) == series
            and only_read(short.text)
        )
        self._series = series if self._short else frozenset()


def _read(answer: Result) -> TypeGuard[Answer]:
    """A page that was read: a 200 with its body."""
    return isinstance(answer, Answer) and answer.status == 200 and not answer.too_large
