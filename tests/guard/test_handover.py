"""The guard has precedence over a console: a console that acts for the profile (holds its
actor lock) hands over at its next tick to a guard started beside it, stops telling, and acts
again once the guard has gone. Real processes: the console's telling part, driven directly
with the real locks in one process, and a real `vramtop guard` in another."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest

from vramtop.core.server_events import Event
from vramtop.guard.others import told_open_kinds
from vramtop.supervisor.actor import CONSOLE, GUARD, ActorLock

# A console's telling, with a finding that opens and closes at each tick: while it acts, each
# tick writes a notification (an OSC sequence, printed as a JSON line).
CONSOLE_TELLING = textwrap.dedent(
    """
    import json, sys, time
    from dataclasses import replace
    from vramtop.core.findings import Finding
    from vramtop.tui.telling import ConsoleTelling

    class Backend:
        recorded = False
        can_act = True
        profile_name = "broken"

    sent = []  # this tick's, printed after what it said of who acts

    def write(text):
        sent.append(text)

    telling = ConsoleTelling(Backend(), write)
    print(json.dumps({"acting": telling.acting}), flush=True)
    finding = Finding("vram_contention", "warning", 1.0, 1.0, None, "the call took its memory")
    tick = 0
    while True:
        tick += 1
        # Open on odd ticks, closed on even ones (as the runner's step would say).
        opened, closed = ([finding], []) if tick % 2 else ([], [replace(finding, closed_t=tick)])
        telling.findings_changed(opened, closed)
        for words in telling.take_said():
            print(json.dumps({"said": words, "acting": telling.acting}), flush=True)
        for text in sent:
            print(json.dumps({"osc": text}), flush=True)
        sent.clear()
        time.sleep(0.05)
    """
)


class Lines:
    """A child's output, line by line, with a deadline (a reader thread)."""

    def __init__(self, stream: IO[str]) -> None:
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line)

    def until(self, words: str, timeout_s: float = 60.0) -> list[str]:
        """The lines up to and including the first that holds `words`."""
        seen: list[str] = []
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError(f"no line with {words!r} in {timeout_s} s: {seen}") from None
            seen.append(line)
            if words in line:
                return seen


def _child(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def test_a_guard_started_beside_a_console_takes_over_and_hands_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path))  # this process reads the locks too
    profiles = tmp_path / "config" / "profiles"
    profiles.mkdir(parents=True)
    (profiles / "broken.toml").write_text(
        'name = "broken"\nargv = ["/nonexistent/vllm", "serve", "m"]\nport = 9\n'
    )
    env = {**os.environ, "VRAMTOP_HOME": str(tmp_path)}
    console = _child([sys.executable, "-c", CONSOLE_TELLING], env)
    guard: subprocess.Popen[str] | None = None
    try:
        assert console.stdout is not None
        told = Lines(console.stdout)
        assert json.loads(told.until("acting")[-1]) == {"acting": True}
        assert any("osc" in line for line in told.until("osc"))  # it tells, tick by tick
        guard = _child(
            [
                sys.executable,
                "-m",
                "vramtop",
                "guard",
                "--profile",
                "broken",
                "--notify",
                "terminal",
            ],
            env,
        )
        assert guard.stderr is not None
        said = Lines(guard.stderr)
        # (It takes the actor lock within a tick or two of the console's: the hand-over
        # that takes longer, and its words, are the next test's.)
        said.until("guarding profile broken")
        # The console said so once, and told nothing from then on.
        handed = told.until("your keys still act", timeout_s=10)
        assert json.loads(handed[-1]) == {
            "said": "a guard watches; your keys still act",
            "acting": False,
        }
        holder = ActorLock("broken", CONSOLE).holder()
        assert holder is not None and holder["kind"] == GUARD and holder["pid"] == guard.pid
        # A second guard is refused, naming the first.
        second = subprocess.run(
            [sys.executable, "-m", "vramtop", "guard", "--profile", "broken"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert second.returncode == 2
        assert f"a guard (pid {guard.pid}) already acts for profile broken" in second.stderr
        # The guard leaves: the console acts again at its next tick, and says so.
        guard.send_signal(signal.SIGTERM)
        assert guard.wait(60) == 0
        meanwhile = told.until("has left", timeout_s=30)
        assert not [line for line in meanwhile if "osc" in line], meanwhile  # nothing told
        assert json.loads(meanwhile[-1]) == {
            "said": "the guard has left: this console acts again",
            "acting": True,
        }
        assert told.until("osc", timeout_s=10)  # it tells again
        holder = ActorLock("broken", CONSOLE).holder()
        assert holder is not None and holder["pid"] == console.pid
    finally:
        for child in (guard, console):
            if child is not None and child.poll() is None:
                child.kill()
                child.wait(10)


@pytest.mark.slow
def test_a_console_that_does_not_hand_over_sends_the_guard_away_naming_it(
    tmp_path: Path,
) -> None:
    # An older vramtop's console: it holds the actor lock and never looks at the guard lock.
    profiles = tmp_path / "config" / "profiles"
    profiles.mkdir(parents=True)
    (profiles / "broken.toml").write_text(
        'name = "broken"\nargv = ["/nonexistent/vllm", "serve", "m"]\nport = 9\n'
    )
    env = {**os.environ, "VRAMTOP_HOME": str(tmp_path)}
    old = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\nfrom vramtop.supervisor.actor import ActorLock\n"
            "assert ActorLock('broken', 'console').try_acquire()\n"
            "print('held', flush=True)\nsys.stdin.readline()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert old.stdout is not None and old.stdout.readline().strip() == "held"
        guard = subprocess.run(
            [sys.executable, "-m", "vramtop", "guard", "--profile", "broken"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert guard.returncode == 2, guard.stderr
        assert f"waiting for the console (pid {old.pid}) to hand over" in guard.stderr
        assert f"a console (pid {old.pid}) acts for profile broken and did not hand over" in (
            guard.stderr
        )
        assert "Traceback" not in guard.stderr
    finally:
        old.kill()
        old.wait(10)


def _finding(t: float, kind: str, change: str, told_by: str | None = "console") -> Event:
    detail = {"kind": kind, "change": change}
    return Event(t, "finding", detail if told_by is None else {**detail, "told_by": told_by})


def test_findings_the_lasting_timeline_holds_open_are_the_ones_already_told() -> None:
    events: list[Any] = [
        _finding(1.0, "vram_contention", "opened"),
        _finding(2.0, "kv_pressure", "opened"),
        _finding(3.0, "kv_pressure", "closed"),
        Event(4.0, "relaunch", {"result": "ok", "asked_by": "key"}),
        _finding(5.0, "crash", "closed"),
    ]
    assert told_open_kinds(events) == {"vram_contention": 1.0}
    assert told_open_kinds([*events, _finding(6.0, "vram_contention", "closed")]) == {}
    # Opened by an earlier guard, or by a vramtop that did not say who told it: no console
    # told the person, so the guard tells it.
    assert told_open_kinds([_finding(7.0, "vram_slowdown", "opened", told_by="guard")]) == {}
    assert told_open_kinds([_finding(8.0, "vram_slowdown", "opened", told_by=None)]) == {}
