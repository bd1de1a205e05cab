"""Reaching a person who is not looking at the console: a Windows toast from WSL2, the
desktop's notify-send, the terminal's own sequences, and a command of their own
(`--on-finding CMD`). `notifier_for` builds the `Notifier` a profile or the command line
asks for, with sensible defaults per machine."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from vramtop.notify.desktop import NotifySendSender, has_desktop
from vramtop.notify.notifier import Notifier, stdout_writer
from vramtop.notify.on_finding import OnFindingSender, command_words
from vramtop.notify.sending import Sender, SendFailed
from vramtop.notify.terminal import TerminalSender
from vramtop.notify.toast import ToastSender

__all__ = [
    "SENDER_NAMES",
    "Notifier",
    "NotifySendSender",
    "OnFindingSender",
    "SendFailed",
    "Sender",
    "TerminalSender",
    "ToastSender",
    "command_words",
    "default_names",
    "notifier_for",
]

SENDER_NAMES = ("toast", "notify-send", "terminal")


def default_names(*, wsl: bool, desktop: bool | None = None) -> list[str]:
    """WSL2: a Windows toast and the terminal; a Linux desktop: notify-send and the terminal;
    otherwise the terminal only."""
    if wsl:
        return ["toast", "terminal"]
    if has_desktop() if desktop is None else desktop:
        return ["notify-send", "terminal"]
    return ["terminal"]


def notifier_for(
    names: Sequence[str] | None,
    *,
    on_finding: str | None,
    wsl: bool,
    terminal: Callable[[str], None] | None = None,
    on_problem: Callable[[str], None] | None = None,
) -> Notifier:
    """The Notifier for `names` (None or empty: the machine's defaults), plus `on_finding`'s
    command when given. `terminal` writes the terminal's sequences (default: stdout when it
    is a terminal; none otherwise). ValueError, with the reason in words, for a name that is
    not a sender or a command that cannot be split."""
    chosen = list(names) if names else default_names(wsl=wsl)
    unknown = [n for n in chosen if n not in SENDER_NAMES]
    if unknown:
        raise ValueError(
            f"unknown notification {unknown[0]!r}: choose from {', '.join(SENDER_NAMES)}"
        )
    senders: list[Sender] = []
    for name in dict.fromkeys(chosen):
        if name == "toast":
            senders.append(ToastSender())
        elif name == "notify-send":
            senders.append(NotifySendSender())
        elif name == "terminal":
            write = terminal or stdout_writer()
            if write is not None:
                senders.append(TerminalSender(write))
    if on_finding is not None:
        senders.append(OnFindingSender(on_finding))
    return Notifier(senders, on_problem=on_problem)
