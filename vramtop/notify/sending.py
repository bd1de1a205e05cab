"""What every sender is: a name, and `send(news)`, which raises `SendFailed` with the reason
in words ("powershell.exe is not on the PATH") when the news cannot go out."""

from __future__ import annotations

from typing import Protocol

from vramtop.core.news import News
from vramtop.core.secrets import mask_line


class SendFailed(Exception):
    """The news could not be sent; the message says why, for "cannot notify: …"."""


def said(stderr: bytes) -> str:
    """What a sender's program wrote to stderr, on one line, cut, and with any secret in it
    masked (it goes to the journal and the console's status line)."""
    return mask_line(" ".join(stderr.decode(errors="replace").split())[:200])


class Sender(Protocol):
    name: str

    def send(self, news: News) -> None: ...
