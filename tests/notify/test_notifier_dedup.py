"""The Notifier: the same news twice in a row is sent once; a sender that hangs or breaks
never holds up `send` nor stops the others."""

from __future__ import annotations

import threading

from notify_fakes import contention, wait_for

from vramtop.core.news import News, action_news, finding_closed, finding_opened
from vramtop.notify import Notifier


class Recording:
    name = "recording"

    def __init__(self) -> None:
        self.got: list[str] = []

    def send(self, news: News) -> None:
        self.got.append(news.key)


def test_the_same_news_twice_in_a_row_is_sent_once() -> None:
    sender = Recording()
    notifier = Notifier([sender])
    finding = contention()
    refreshed = contention()  # a later tick's copy of the same finding: the same news
    assert notifier.send(finding_opened(finding))
    assert not notifier.send(finding_opened(refreshed))
    assert notifier.send(finding_closed(finding))
    assert notifier.send(finding_opened(finding))  # not in a row: sent again
    assert notifier.flush(10)
    assert sender.got == [
        "opened:vram_contention@12.000",
        "closed:vram_contention@12.000",
        "opened:vram_contention@12.000",
    ]
    assert notifier.sent == 3


def test_neither_send_nor_the_other_senders_wait_for_a_sender_that_hangs() -> None:
    release = threading.Event()
    entered = threading.Event()

    class Hanging:
        name = "hanging"

        def __init__(self) -> None:
            self.got: list[str] = []

        def send(self, news: News) -> None:
            entered.set()
            release.wait(60)
            self.got.append(news.key)

    hanging = Hanging()
    after = Recording()
    notifier = Notifier([hanging, after])
    assert notifier.send(finding_opened(contention()))
    assert entered.wait(10)
    # The sender hangs, and send() has returned; the next news is taken too, and the next
    # sender gets both while the first still hangs.
    assert notifier.send(action_news("relaunch", "ok", gpu_memory_utilization=0.85))
    wait_for(lambda: len(after.got) == 2, "the second sender got both news")
    assert hanging.got == []
    release.set()
    assert notifier.flush(10)
    assert hanging.got == after.got


def test_a_sender_that_raises_anything_is_a_problem_not_a_crash() -> None:
    class Broken:
        name = "broken"

        def send(self, news: News) -> None:
            raise RuntimeError("boom")

    problems: list[str] = []
    after = Recording()
    notifier = Notifier([Broken(), after], on_problem=problems.append)
    notifier.send(finding_opened(contention()))
    assert notifier.flush(10)
    assert problems == ["cannot notify: broken: RuntimeError: boom"]
    assert len(after.got) == 1
