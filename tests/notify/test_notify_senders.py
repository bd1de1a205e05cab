"""Each sender against a fake executable (or a real command): a toast through a fake
`powershell.exe`, `notify-send`, an `--on-finding` Python script, the terminal's bytes."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import psutil
import pytest
from notify_fakes import Fakes, contention

from vramtop.core.news import News, finding_closed, finding_opened
from vramtop.notify import (
    Notifier,
    NotifySendSender,
    OnFindingSender,
    SendFailed,
    TerminalSender,
    ToastSender,
    default_names,
    notifier_for,
)
from vramtop.notify.toast import interop_problem, toast_script, xml_text

# ---------------------------------------------------------------- toast ---------------------


def test_a_fake_powershell_receives_a_toast_whose_text_names_the_finding(
    fakes: Fakes, news: News, tmp_path: Path
) -> None:
    fakes.install("powershell.exe")
    ToastSender(binfmt_dir=tmp_path / "no-binfmt").send(news)
    (call,) = fakes.calls()
    assert call["argv"][1:] == ["-NoProfile", "-NonInteractive", "-Command", "-"]
    script = str(call["stdin"])
    assert (
        "[Windows.UI.Notifications.ToastNotificationManager, Windows.UI.Notifications, "
        "ContentType = WindowsRuntime]" in script
    )
    assert '<toast scenario="urgent">' in script
    assert "The desktop is squeezing vLLM&apos;s memory" in script
    assert "vLLM slowed to 7 tok/s (normally 77): the desktop took its memory." in script
    assert "WindowsPowerShell\\v1.0\\powershell.exe" in script  # PowerShell's own app id


def test_the_toasts_text_cannot_leave_its_powershell_string() -> None:
    hostile = News("k", "it’s <b>&'; calc.exe; '", "line\nbreak\x07 ‘x’ é", "critical")
    script = toast_script(hostile)
    assert script.isascii()
    (load,) = [line for line in script.splitlines() if line.startswith("$xml.LoadXml(")]
    inner = load[len("$xml.LoadXml('") : -len("')")]
    assert "'" not in inner  # the only single quotes are the string's own
    assert "&#8217;" in inner and "&lt;b&gt;&amp;&apos;" in inner and "&#233;" in inner
    assert "\x07" not in inner and "line break" in inner
    assert xml_text("a\x00b") == "ab"


def test_interop_off_is_said_as_cannot_notify_never_a_crash(
    fakes: Fakes, news: News, tmp_path: Path
) -> None:
    fakes.install("powershell.exe")
    binfmt = tmp_path / "binfmt_misc"
    binfmt.mkdir()
    (binfmt / "register").write_text("")
    (binfmt / "status").write_text("enabled\n")
    assert interop_problem(binfmt) is not None and "interop is off" in str(interop_problem(binfmt))
    problems: list[str] = []
    sender = ToastSender(binfmt_dir=binfmt, check_interop=True)  # as inside WSL
    notifier = Notifier([sender], on_problem=problems.append)
    assert notifier.send(news)
    assert notifier.send(finding_closed(contention()))
    assert notifier.flush(10)
    assert fakes.calls() == []  # never tried to run Windows' PowerShell
    assert problems == [
        "cannot notify: toast: WSL interop is off (no WSLInterop handler): "
        "enable [interop] in /etc/wsl.conf"
    ]  # once, however many news
    # Outside WSL interop's state means nothing: a powershell.exe on the PATH is run.
    ToastSender(binfmt_dir=binfmt, check_interop=False).send(news)
    assert len(fakes.calls()) == 1
    (binfmt / "WSLInterop").write_text("disabled\ninterpreter /init\n")
    assert "disabled" in str(interop_problem(binfmt))
    (binfmt / "WSLInterop").write_text("enabled\ninterpreter /init\n")
    assert interop_problem(binfmt) is None


def test_no_powershell_on_the_path_is_said(
    news: News, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("vramtop.notify.toast.DEFAULT_POWERSHELL", str(tmp_path / "none.exe"))
    with pytest.raises(SendFailed, match=r"powershell\.exe is not on the PATH"):
        ToastSender(binfmt_dir=tmp_path / "none").send(news)


def test_a_powershell_that_fails_is_said_with_its_exit_code(
    fakes: Fakes, news: News, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakes.install("powershell.exe")
    monkeypatch.setenv("FAKE_EXIT", "3")
    with pytest.raises(SendFailed, match="exited with code 3"):
        ToastSender(binfmt_dir=tmp_path / "none").send(news)


# ---------------------------------------------------------------- notify-send ---------------


def test_notify_send_on_a_linux_desktop(
    fakes: Fakes, news: News, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakes.install("notify-send")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(SendFailed, match="no desktop session"):
        NotifySendSender().send(news)
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
    NotifySendSender().send(news)
    (call,) = fakes.calls()
    assert call["argv"][1:] == [
        "--app-name=vramtop",
        "--urgency=critical",
        "--",
        news.title,
        news.body,
    ]


# ---------------------------------------------------------------- --on-finding --------------

RECEIVER = textwrap.dedent(
    """
    import json, os, sys
    finding = json.load(sys.stdin)
    out = {"finding": finding, **{k: v for k, v in os.environ.items() if k.startswith("VRAMTOP_")}}
    with open(sys.argv[1], "w") as f:
        json.dump(out, f)
    """
)


def test_on_finding_runs_the_command_with_the_finding_json_and_its_env(
    tmp_path: Path, news: News
) -> None:
    script = tmp_path / "receive it.py"
    script.write_text(RECEIVER)
    out = tmp_path / "got.json"
    command = f"{sys.executable} '{script}' {out}"  # split as a shell would, run without one
    OnFindingSender(command).send(news)
    got = json.loads(out.read_text())
    assert got["finding"]["kind"] == "vram_contention"
    assert got["finding"]["evidence"]["generation_tps"] == 7.2
    assert got["VRAMTOP_FINDING_KIND"] == "vram_contention"
    assert got["VRAMTOP_FINDING_SEVERITY"] == "critical"
    assert got["VRAMTOP_FINDING_SUMMARY"].startswith("Generation fell to 7.2 tok/s")
    assert got["VRAMTOP_NEWS"] == "opened"


def test_on_finding_gets_counts_as_whole_numbers(tmp_path: Path) -> None:
    # vLLM's metrics page gives every number as a float (`2.0`); the evidence's counts are
    # written as `--once` writes them: 2.
    from vramtop.core.diagnosis.kv_pressure import KvFacts
    from vramtop.core.findings import Evidence, Finding

    facts = KvFacts(
        kv_cache_usage=0.97,
        requests_running=2.0,
        requests_waiting=3.0,
        preemptions_total=14.0,
        preempting=True,
        kv_cache_tokens=303_555,
    )
    finding = Finding(
        "kv_pressure", "warning", 5.0, 5.0, None, "The KV pool is full.", Evidence.of(facts)
    )
    script = tmp_path / "receive.py"
    script.write_text(RECEIVER)
    out = tmp_path / "got.json"
    OnFindingSender(f"{sys.executable} {script} {out}").send(finding_opened(finding))
    evidence = json.loads(out.read_text())["finding"]["evidence"]
    counts = [evidence[k] for k in ("requests_running", "requests_waiting", "preemptions_total")]
    assert counts == [2, 3, 14] and all(type(c) is int for c in counts)
    assert evidence["kv_cache_usage"] == 0.97  # a ratio stays a ratio


def test_on_finding_is_run_without_a_shell(tmp_path: Path) -> None:
    planted = tmp_path / "planted"
    finding = contention()
    hostile = News(
        "k", "t", "b", "critical", {**finding.to_json(), "summary": f"x; touch {planted}"}
    )
    out = tmp_path / "got.json"
    script = tmp_path / "r.py"
    script.write_text(RECEIVER)
    OnFindingSender(f"{sys.executable} {script} {out}").send(hostile)
    assert out.exists() and not planted.exists()
    with pytest.raises(ValueError, match="cannot be split"):
        OnFindingSender("echo 'unclosed")


@pytest.mark.slow
def test_a_hanging_command_is_killed_with_what_it_started(tmp_path: Path, news: News) -> None:
    marker = f"hang-{tmp_path.name}"
    hang = tmp_path / "hang.py"
    hang.write_text(
        textwrap.dedent(
            f"""
            import subprocess, sys, time
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", {marker!r}])
            time.sleep(600)
            """
        )
    )
    sender = OnFindingSender(f"{sys.executable} {hang} {marker}", timeout_s=3.0)
    with pytest.raises(SendFailed, match="did not finish within 3 s and was killed"):
        sender.send(news)
    left = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = proc.info["cmdline"] or []
        if marker in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE:
            left.append(proc.pid)
    assert left == [], "the command or what it started outlived the timeout"


def test_a_command_that_fails_is_said_and_the_notifier_goes_on(tmp_path: Path, news: News) -> None:
    problems: list[str] = []
    seen: list[str] = []
    notifier = Notifier(
        [
            OnFindingSender(f"{sys.executable} -c 'import sys; sys.exit(4)'"),
            TerminalSender(seen.append),
        ],
        on_problem=problems.append,
    )
    notifier.send(news)
    assert notifier.flush(30)
    assert problems and "exited with code 4" in problems[0]
    assert seen, "the next sender still got the news"


def test_what_a_failing_command_wrote_is_said_with_its_secrets_masked(news: News) -> None:
    """The command's stderr goes to the journal and the status line: a key in it does not."""
    script = "import sys; sys.stderr.write('refused: --api-key sk-live-123456 bad'); sys.exit(3)"
    with pytest.raises(SendFailed) as failed:
        OnFindingSender(f"{sys.executable} -c {json.dumps(script)}").send(news)
    assert "exited with code 3: refused: --api-key ***" in str(failed.value)
    assert "sk-live-123456" not in str(failed.value)


# ---------------------------------------------------------------- terminal ------------------


def test_the_taskbar_is_red_while_any_finding_is_open_and_cleared_when_none_is() -> None:
    written: list[str] = []
    terminal = TerminalSender(written.append, tmux=False)
    first, second = contention(t=1.0), contention(t=5.0)
    terminal.send(finding_opened(first))
    assert written[-1].startswith("\x1b]9;4;2;100\x07\x1b]777;notify;vLLM: The desktop")
    terminal.send(finding_opened(second))
    assert "9;4;2" not in written[-1]  # already red
    terminal.send(finding_closed(first))
    assert "9;4;0" not in written[-1]  # the second is still open
    terminal.send(finding_closed(second))
    assert written[-1].startswith("\x1b]9;4;0\x07\x1b]777;notify;vLLM recovered")


def test_osc_777_fields_lose_semicolons_and_control_characters() -> None:
    written: list[str] = []
    TerminalSender(written.append, tmux=False).send(
        News("k", "a;b\x1b]0;evil\x07", "c;\nd\x9c", "warning")
    )
    assert written == ["\x1b]777;notify;ab]0evil;c d\x07"]


def test_inside_tmux_each_sequence_is_wrapped_and_its_escapes_doubled(news: News) -> None:
    written: list[str] = []
    TerminalSender(written.append, tmux=True).send(news)
    (text,) = written
    assert text.startswith("\x1bPtmux;\x1b\x1b]9;4;2;100\x07\x1b\\\x1bPtmux;\x1b\x1b]777;notify;")
    assert text.endswith("\x07\x1b\\")


# ---------------------------------------------------------------- defaults ------------------


def test_sensible_defaults_per_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_names(wsl=True) == ["toast", "terminal"]
    assert default_names(wsl=False, desktop=True) == ["notify-send", "terminal"]
    assert default_names(wsl=False, desktop=False) == ["terminal"]
    monkeypatch.setenv("DISPLAY", ":0")
    assert default_names(wsl=False) == ["notify-send", "terminal"]


def test_notifier_for_builds_the_senders_asked_for() -> None:
    written: list[str] = []
    notifier = notifier_for(None, on_finding="true", wsl=True, terminal=written.append)
    assert notifier.names == ["toast", "terminal", "on-finding"]
    assert notifier_for(["terminal"], on_finding=None, wsl=True, terminal=written.append).names == [
        "terminal"
    ]
    with pytest.raises(ValueError, match="unknown notification 'email'"):
        notifier_for(["email"], on_finding=None, wsl=False)
    assert os.environ.get("VRAMTOP_NEWS") is None
