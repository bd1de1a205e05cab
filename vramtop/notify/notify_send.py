"""`notify-send` on a Linux desktop (a DISPLAY or WAYLAND_DISPLAY in the environment)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

from vramtop.core.news import News
from vramtop.notify.sending import SendFailed, said
from vramtop.programs import TimedOut, run_program

TIMEOUT_S = 10.0


def has_desktop(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


class NotifySendSender:
    name = "notify-send"

    def __init__(self, *, executable: str | None = None, timeout_s: float = TIMEOUT_S) -> None:
        self._executable = executable
        self._timeout_s = timeout_s

    def send(self, news: News) -> None:
        if not has_desktop():
            raise SendFailed("no desktop session here (neither DISPLAY nor WAYLAND_DISPLAY set)")
        found = self._executable or shutil.which("notify-send")
        if found is None:
            raise SendFailed("notify-send is not installed (Debian/Ubuntu: libnotify-bin)")
        urgency = {"critical": "critical", "warning": "normal"}.get(news.severity, "low")
        argv = [found, "--app-name=vramtop", f"--urgency={urgency}", "--", news.title, news.body]
        try:
            done = run_program(argv, timeout_s=self._timeout_s)
        except TimedOut as exc:
            raise SendFailed(f"notify-send {exc}") from None
        except OSError as exc:
            raise SendFailed(f"notify-send could not run: {exc}") from None
        if done.returncode != 0:
            raise SendFailed(f"notify-send exited with code {done.returncode}: {said(done.stderr)}")
