"""Who the news reaches, said when the guard starts: the defaults that cannot work here are
left out with the reason in a few words, and nobody at all is said plainly, with what to
give instead."""

from __future__ import annotations

import pytest
from notify_fakes import Fakes

import vramtop.notify as notify
from vramtop.notify import notifier_for


@pytest.fixture
def no_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """stdout is no terminal (a guard under systemd)."""
    monkeypatch.setattr(notify, "stdout_writer", lambda: None)


def test_every_default_that_works_is_named_alone(
    fakes: Fakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakes.install("notify-send")
    monkeypatch.setenv("DISPLAY", ":0")
    notifier = notifier_for(None, on_finding=None, wsl=False, terminal=lambda text: None)
    assert notifier.names == ["notify-send", "terminal"] and notifier.dropped == ()
    assert notifier.reach == "notify-send, terminal"


@pytest.mark.usefixtures("no_terminal")
def test_a_default_that_cannot_work_is_left_out_and_said_why(
    fakes: Fakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(fakes.bin))  # no notify-send installed
    monkeypatch.setenv("DISPLAY", ":0")
    with_command = notifier_for(None, on_finding="true", wsl=False)
    assert with_command.names == ["on-finding"]
    assert with_command.reach == (
        "on-finding (left out: notify-send not found, no terminal on stdout)"
    )
    on_wsl = notifier_for(None, on_finding=None, wsl=True)
    assert on_wsl.reach == "toast (left out: no terminal on stdout)"


@pytest.mark.usefixtures("no_terminal")
def test_nobody_at_all_is_said_plainly_with_what_to_give(
    fakes: Fakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(fakes.bin))
    monkeypatch.setenv("DISPLAY", ":0")
    nobody = notifier_for(None, on_finding=None, wsl=False)
    assert nobody.names == []
    assert nobody.reach == (
        "nobody: notify-send not found, no terminal on stdout; give --on-finding CMD"
    )
    monkeypatch.delenv("DISPLAY")
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert notifier_for(None, on_finding=None, wsl=False).reach == (
        "nobody: no display for notify-send, no terminal on stdout; give --on-finding CMD"
    )
    # The terminal asked for by name, where there is none: on WSL2 a toast would reach them.
    asked = notifier_for(["terminal"], on_finding=None, wsl=True)
    assert asked.reach == ("nobody: no terminal on stdout; give --notify toast or --on-finding CMD")


def test_a_notify_send_asked_for_by_name_is_kept_to_say_why_at_the_first_news(
    fakes: Fakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(fakes.bin))
    notifier = notifier_for(["notify-send"], on_finding=None, wsl=False)
    assert notifier.names == ["notify-send"] and notifier.reach == "notify-send"
