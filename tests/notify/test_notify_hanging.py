"""Senders that hang: the others are not held up, a timeout ends the sender's whole process
group (a `sleep` its fake started too), is said once, and a program still running when
vramtop exits ends with it. PowerShell starts from Windows' own drive where there is one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from notify_fakes import Fakes, contention, end_hung, running, wait_for

from vramtop.core.news import News, finding_closed, finding_opened
from vramtop.notify import (
    Notifier,
    NotifySendSender,
    OnFindingSender,
    Sender,
    TerminalSender,
    ToastSender,
)


@pytest.fixture
def hanging(fakes: Fakes) -> Iterator[Fakes]:
    yield fakes
    end_hung(fakes)


@pytest.fixture
def desktop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")


def test_notify_send_is_called_while_the_toast_still_hangs(
    hanging: Fakes, news: News, tmp_path: Path, desktop: None
) -> None:
    hanging.install_hanging("powershell.exe")
    hanging.install("notify-send")
    problems: list[str] = []
    notifier = Notifier(
        [ToastSender(binfmt_dir=tmp_path / "none", timeout_s=600), NotifySendSender()],
        on_problem=problems.append,
    )
    assert notifier.send(news)
    wait_for(hanging.calls, "notify-send called")
    ((shell, child),) = wait_for(hanging.hung, "the toast's PowerShell started")
    assert running(shell) and running(child), "the toast had stopped hanging"
    assert not notifier.flush(0)  # the toast is still under way
    os.killpg(shell, signal.SIGKILL)  # (not waiting for its 600 s)
    assert notifier.flush(30)
    assert problems == ["cannot notify: toast: powershell.exe exited with code -9: "]


def _sender(name: str, tmp_path: Path, timeout_s: float) -> Sender:
    if name == "toast":
        return ToastSender(binfmt_dir=tmp_path / "none", timeout_s=timeout_s)
    if name == "notify-send":
        return NotifySendSender(timeout_s=timeout_s)
    return OnFindingSender(str(tmp_path / "bin" / "on-finding"), timeout_s=timeout_s)


@pytest.mark.parametrize(
    ("name", "program", "ignore_term"),
    [
        ("toast", "powershell.exe", False),
        ("toast", "powershell.exe", True),
        ("notify-send", "notify-send", True),
        ("on-finding", "on-finding", True),
    ],
)
@pytest.mark.slow
def test_a_sender_that_times_out_ends_its_whole_group_and_is_said_once(
    hanging: Fakes,
    tmp_path: Path,
    desktop: None,
    name: str,
    program: str,
    ignore_term: bool,
) -> None:
    """`ignore_term`: the fake and its sleep ignore SIGTERM, so SIGKILL has to follow."""
    hanging.install_hanging(program, ignore_term=ignore_term)
    problems: list[str] = []
    seen: list[str] = []
    notifier = Notifier(
        [_sender(name, tmp_path, timeout_s=3), TerminalSender(seen.append, tmux=False)],
        on_problem=problems.append,
    )
    finding = contention()
    assert notifier.send(finding_opened(finding))
    assert notifier.send(finding_closed(finding))
    assert wait_for(lambda: len(seen) == 2, "the terminal told both news")
    assert notifier.flush(60)
    started = hanging.hung()
    assert len(started) == 2  # one for each news
    for shell, child in started:
        wait_for(lambda s=shell, c=child: not running(s) and not running(c), "the group ended")
    said = {"toast": "powershell.exe", "notify-send": "notify-send"}.get(
        name, f"--on-finding {tmp_path / 'bin' / 'on-finding'}"
    )
    assert problems == [f"cannot notify: {name}: {said} did not finish within 3 s and was killed"]


def test_a_program_still_running_when_vramtop_exits_ends_with_it(
    hanging: Fakes, tmp_path: Path
) -> None:
    hanging.install_hanging("on-finding")
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from notify_fakes import contention, wait_for
        from vramtop.core.news import finding_opened
        from vramtop.notify import Notifier, OnFindingSender

        notifier = Notifier([OnFindingSender({str(tmp_path / "bin" / "on-finding")!r})])
        notifier.send(finding_opened(contention()))
        hung = lambda: list((__import__("pathlib").Path({str(hanging.out)!r})).glob("hung-*"))
        wait_for(hung, "the command started")
        notifier.close(0.1)  # as the guard does when it stops
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    ((shell, child),) = hanging.hung()
    wait_for(lambda: not running(shell) and not running(child), "the command and its sleep ended")


def test_powershell_starts_from_windows_own_drive_where_there_is_one(
    fakes: Fakes, news: News, tmp_path: Path
) -> None:
    fakes.install("powershell.exe")
    drive = tmp_path / "c"
    drive.mkdir()
    ToastSender(binfmt_dir=tmp_path / "none", windows_drive=drive).send(news)
    ToastSender(binfmt_dir=tmp_path / "none", windows_drive=tmp_path / "no-drive").send(news)
    first, second = fakes.calls()
    assert first["cwd"] == str(drive)
    assert second["cwd"] == os.getcwd()  # no Windows drive: where vramtop runs, as before
