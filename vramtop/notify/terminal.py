"""The terminal's own ways to reach a person who is looking at another window.

OSC 9;4 sets Windows Terminal's taskbar progress state: `ESC ] 9 ; 4 ; 2 ; 100 BEL` (red, the
error state) while a finding is open, `ESC ] 9 ; 4 ; 0 BEL` once none is. OSC 777
(`ESC ] 777 ; notify ; TITLE ; BODY BEL`) is a desktop notification where the terminal takes
it (Windows Terminal's recent builds, when the tab is not focused; several Linux terminals).
A `;` would end TITLE early and a control character would end the sequence, so both are taken
out. Inside tmux each sequence is wrapped for passthrough (`ESC P tmux; … ESC \\`, every ESC
doubled), which tmux forwards with `allow-passthrough on`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from vramtop.core.news import CLOSED, OPENED, News

ESC = "\x1b"
BEL = "\x07"
TASKBAR_ERROR = f"{ESC}]9;4;2;100{BEL}"
TASKBAR_CLEAR = f"{ESC}]9;4;0{BEL}"


def osc_words(text: str) -> str:
    """`text` as one field of an OSC sequence: no `;`, no control character."""
    spaced = " ".join(text.split())  # a line break or a tab reads as a space
    return "".join(c for c in spaced if c != ";" and c.isprintable())


def notification(title: str, body: str) -> str:
    return f"{ESC}]777;notify;{osc_words(title)};{osc_words(body)}{BEL}"


def tmux_wrapped(sequence: str) -> str:
    return f"{ESC}Ptmux;{sequence.replace(ESC, ESC + ESC)}{ESC}\\"


def in_tmux(env: Mapping[str, str] | None = None) -> bool:
    return bool((os.environ if env is None else env).get("TMUX"))


class TerminalSender:
    """Writes each news's sequences through `write` (the console: its driver's output;
    elsewhere a terminal's stdout). Keeps which findings are open, so that the taskbar's
    error state lasts until the last one closes."""

    name = "terminal"

    def __init__(self, write: Callable[[str], None], *, tmux: bool | None = None) -> None:
        self._write = write
        self._tmux = in_tmux() if tmux is None else tmux
        self._open: set[str] = set()

    def sequences(self, news: News) -> list[str]:
        """What `news` writes (and the open findings it leaves), without writing it."""
        out: list[str] = []
        ident = news.key.split(":", 1)[-1]
        if news.change == OPENED:
            if not self._open:
                out.append(TASKBAR_ERROR)
            self._open.add(ident)
        elif news.change == CLOSED and ident in self._open:
            self._open.discard(ident)
            if not self._open:
                out.append(TASKBAR_CLEAR)
        out.append(notification(news.title, news.body))
        return [tmux_wrapped(s) for s in out] if self._tmux else out

    def send(self, news: News) -> None:
        text = "".join(self.sequences(news))
        if text:
            self._write(text)
