"""Which /metrics page a server is asked for, with a fake GET (the scraper's tests run it
against an HTTP server)."""

from __future__ import annotations

from collections import Counter

from vramtop.sources.http_answer import Answer, Result
from vramtop.sources.metrics_page import RETRY_READS, SHORT_PAGE, WHOLE_PAGE, MetricsPage

_WHOLE = (
    "# TYPE vllm:num_requests_running gauge\n"
    'vllm:num_requests_running{engine="0"} 2.0\n'
    'vllm:e2e_request_latency_seconds_count{engine="0"} 7.0\n'
)
_SHORT = 'vllm:num_requests_running{engine="0"} 2.0\n'


class FakeServer:
    def __init__(self) -> None:
        self.answers: dict[str, Result] = {WHOLE_PAGE: Answer(200, _WHOLE)}
        self.answers[SHORT_PAGE] = Answer(200, _SHORT)
        self.asked: Counter[str] = Counter()

    def get(self, path: str) -> Result:
        self.asked[path] += 1
        return self.answers[path]


def test_the_short_page_is_asked_once_judged_and_its_failures_are_the_reading() -> None:
    server, page = FakeServer(), MetricsPage()
    assert page.read(server.get) == Answer(200, _WHOLE)
    assert page.short and page.read(server.get) == Answer(200, _SHORT)
    timeout = TimeoutError("timed out")
    server.answers[SHORT_PAGE] = timeout
    assert page.read(server.get) is timeout  # not asked again as the whole page
    assert server.asked == Counter({WHOLE_PAGE: 1, SHORT_PAGE: 3})
    assert page.short  # a server that did not answer is judged by the scraper, not here


def test_a_short_page_over_the_cap_or_failing_is_replaced_by_the_whole_page() -> None:
    for answer in (Answer(200, "", too_large=True), Answer(500, "")):
        server, page = FakeServer(), MetricsPage()
        page.read(server.get)
        server.answers[SHORT_PAGE] = answer
        assert page.read(server.get) == Answer(200, _WHOLE)
        assert not page.short
        page.read(server.get)
        assert server.asked == Counter({WHOLE_PAGE: 3, SHORT_PAGE: 2})


def test_a_whole_page_that_fails_leaves_the_short_page_untried() -> None:
    server, page = FakeServer(), MetricsPage()
    server.answers[WHOLE_PAGE] = Answer(503, "")
    page.read(server.get)
    assert server.asked[SHORT_PAGE] == 0
    server.answers[WHOLE_PAGE] = Answer(200, _WHOLE)
    page.read(server.get)
    assert server.asked[SHORT_PAGE] == 1 and page.short


def test_a_short_page_with_no_answer_when_judged_is_tried_again_later() -> None:
    """A timeout or a busy server at the one moment the short page is judged is no verdict:
    the whole page meanwhile, the short page tried again, and used once it answers."""
    for failure in (TimeoutError("timed out"), Answer(503, "")):
        server, page = FakeServer(), MetricsPage()
        server.answers[SHORT_PAGE] = failure
        for _ in range(RETRY_READS + 1):
            assert page.read(server.get) == Answer(200, _WHOLE)
        assert server.asked[SHORT_PAGE] == 1 and not page.short
        server.answers[SHORT_PAGE] = Answer(200, _SHORT)
        page.read(server.get)
        assert server.asked[SHORT_PAGE] == 2 and page.short
