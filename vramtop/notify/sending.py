"""What every sender is: a name, and `send(news)`, which raises `SendFailed` with the reason
in words ("powershell.exe is not on the PATH") when the news cannot go out."""

from __future__ import annotations

from typing import Protocol

from vramtop.core.news import News


class SendFailed(Exception):
    """The news could not be sent; the message says why, for "cannot notify: …"."""


class Sender(Protocol):
    name: str

    def send(self, news: News) -> None: ...
