"""`--on-finding CMD`: a command of the person's own, run for each news about a finding.

CMD is split as a shell would split words (`shlex`) and run without a shell, so nothing in a
finding's text can become a command. It gets the finding's JSON on stdin and, in its
environment, `VRAMTOP_FINDING_KIND`, `VRAMTOP_FINDING_SEVERITY`, `VRAMTOP_FINDING_SUMMARY`,
and (added) `VRAMTOP_NEWS`: `opened`, `closed` or `action`. A CMD that outlives its timeout
is killed, with whatever it started (it runs in a process group of its own).
"""

from __future__ import annotations

import json
import os
import shlex

from vramtop.core import secrets
from vramtop.core.news import News
from vramtop.notify.sending import SendFailed, said
from vramtop.programs import TimedOut, run_program

TIMEOUT_S = 10.0


def command_words(command: str) -> list[str]:
    """CMD as words; ValueError with the reason for one that cannot be split or is empty."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        shown = secrets.mask_pasted_keys(command)  # half a quoted key is still a key
        raise ValueError(f"--on-finding {shown!r} cannot be split into words: {exc}") from None
    if not words:
        raise ValueError("--on-finding needs a command")
    return words


class OnFindingSender:
    name = "on-finding"

    def __init__(self, command: str, *, timeout_s: float = TIMEOUT_S) -> None:
        self._argv = command_words(command)
        self._timeout_s = timeout_s

    def send(self, news: News) -> None:
        finding = news.finding
        if finding is None:
            return  # CMD hears of findings (and the actions taken for one) only
        env = {
            **os.environ,
            "VRAMTOP_FINDING_KIND": str(finding.get("kind", "")),
            "VRAMTOP_FINDING_SEVERITY": str(finding.get("severity", "")),
            "VRAMTOP_FINDING_SUMMARY": str(finding.get("summary", "")),
            "VRAMTOP_NEWS": news.change or "",
        }
        data = json.dumps(finding, default=str).encode()
        try:
            done = run_program(self._argv, stdin=data, env=env, timeout_s=self._timeout_s)
        except TimedOut as exc:
            raise SendFailed(f"--on-finding {self._argv[0]} {exc}") from None
        except OSError as exc:
            raise SendFailed(f"--on-finding {self._argv[0]} could not run: {exc}") from None
        if done.returncode != 0:
            raise SendFailed(
                f"--on-finding {self._argv[0]} exited with code {done.returncode}: "
                f"{said(done.stderr)}"
            )
