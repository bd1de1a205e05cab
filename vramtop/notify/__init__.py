"""Reaching a person who is not looking at the console: a Windows toast from WSL2, the
desktop's notify-send, the terminal's own sequences, and a command of their own
(`--on-finding CMD`). `notifier_for` builds the `Notifier` a profile or the command line
asks for, with sensible defaults per machine."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence

from vramtop.notify.notifier import Notifier, stdout_writer
from vramtop.notify.notify_send import NotifySendSender, has_desktop
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
# Why a sender was left out, in the few words the guard's start line says.
NO_TERMINAL = "no terminal on stdout"
NO_DISPLAY = "no display for notify-send"
NO_NOTIFY_SEND = "notify-send not found"


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
    """The Notifier for `names` (None or empty: the machine's defaults that can work here),
    plus `on_finding`'s command when given. `terminal` writes the terminal's sequences
    (default: stdout when it is a terminal; none otherwise). What was left out, and why, is
    the Notifier's `dropped` (its `reach` says it in words). ValueError, with the reason in
    words, for a name that is not a sender or a command that cannot be split."""
    chosen, dropped = (list(names), []) if names else _machine_defaults(wsl)
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
            if write is None:
                dropped.append(NO_TERMINAL)  # (a guard under systemd)
            else:
                senders.append(TerminalSender(write))
    if on_finding is not None:
        senders.append(OnFindingSender(on_finding))
    hint = "give --notify toast or --on-finding CMD" if wsl else "give --on-finding CMD"
    return Notifier(senders, on_problem=on_problem, dropped=dropped, hint=hint)


def _machine_defaults(wsl: bool) -> tuple[list[str], list[str]]:
    """The machine's default senders that can work here, and why the others were left out.
    A notify-send asked for by name is kept even where it cannot work yet: it says why at
    the first news, and may work by the next."""
    chosen = default_names(wsl=wsl)
    if wsl:
        return chosen, []
    if "notify-send" not in chosen:
        return chosen, [NO_DISPLAY]
    if shutil.which("notify-send") is None:
        return [n for n in chosen if n != "notify-send"], [NO_NOTIFY_SEND]
    return chosen, []
