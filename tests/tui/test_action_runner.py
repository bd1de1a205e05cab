"""The console's actions decided without a Textual app running: the runner is given a console
of plain values (`ActionHost`) and Textual's calls as ones that run at once (`AppCalls`), so a
test sees each step of an action as the runner takes it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.support.fake_backend import FakeBackend
from vramtop.settings import Settings
from vramtop.tui.console_state import ConsoleState
from vramtop.tui.messages import ActionFinished, ActionProgress
from vramtop.tui.runner import NOT_READ_YET, OUTCOME_WAIT_S, RESTART_CONFIRM_S, ActionRunner
from vramtop.tui.screens.quit_dialog import QuitDialog
from vramtop.tui.way_back import WayBackOffer


class Console:
    """The console: the backend's latest frame shown, and what it said."""

    def __init__(self, backend: FakeBackend) -> None:
        self.backend = backend
        self.settings = Settings()
        self.shown = ConsoleState().arrived(backend.tick(), None)
        self.way_back_offer: WayBackOffer | None = None
        self.said: list[str | None] = []
        self.reads_asked = 0
        self.clock = 0.0  # the console's clock: a step's seconds are counted on it

    def now(self) -> float:
        return self.clock

    def say(self, text: str | None, *, news: bool = True, after: bool = False) -> None:
        self.shown = self.shown.said(text, self.clock, news=news, after=after)
        self.said.append(self.shown.activity)

    def render_header(self) -> None:
        pass

    def key_of(self, binding_id: str) -> str:
        return {"restart": "r", "start_stop": "s"}[binding_id]

    def request_tick(self) -> int:
        self.reads_asked += 1
        return self.reads_asked


class AtOnce:
    """Textual's calls, run at once on this thread: a worker's work, a call back from it.
    Timers and screens are kept for the test to fire and answer."""

    def __init__(self) -> None:
        self.screen: object = None
        self.screens: list[tuple[object, Callable[[Any], None]]] = []
        self.timers: list[tuple[float, Callable[[], object]]] = []
        self.posted: list[object] = []
        self.toasts: list[str] = []
        self.exited: int | None = None

    def push_screen(self, screen: Any, callback: Callable[[Any], None]) -> object:
        self.screens.append((screen, callback))
        return None

    def run_worker(
        self, work: Callable[[], object], name: str | None, group: str, **_: Any
    ) -> object:
        return work()

    def call_from_thread(self, callback: Callable[..., object], *args: object) -> object:
        return callback(*args)

    def set_timer(self, delay: float, callback: Callable[[], object]) -> object:
        self.timers.append((delay, callback))
        return None

    def notify(self, message: str, **_: Any) -> None:
        self.toasts.append(message)

    def refresh_bindings(self) -> None:
        pass

    def post_message(self, message: Any) -> bool:
        self.posted.append(message)
        return True

    def exit(self, result: int | None) -> None:
        self.exited = result


def _runner(backend: FakeBackend) -> tuple[ActionRunner, Console, AtOnce]:
    console, calls = Console(backend), AtOnce()
    return ActionRunner(console, calls), console, calls


def test_r_asks_while_requests_run_forgets_the_question_then_restarts_on_a_second_press() -> None:
    backend = FakeBackend()
    runner, console, calls = _runner(backend)
    runner.restart()
    assert console.said[-1] == "1 request(s) running: press r again to restart"
    [(delay, disarm)] = calls.timers
    assert delay == RESTART_CONFIRM_S
    disarm()  # the question lapses: the next r asks again
    runner.restart()
    assert backend.calls == []
    runner.restart()
    assert backend.calls == [("restart", "requests lost")]
    assert runner.busy == "restart"
    finished = [m for m in calls.posted if isinstance(m, ActionFinished)]
    assert [m.result.ok for m in finished] == [True]
    assert any(isinstance(m, ActionProgress) for m in calls.posted)
    runner.finished(finished[0])
    assert runner.busy is None and console.reads_asked == 1
    assert runner.acting == "restarting" and console.said[-1] != "restarted"
    assert not runner.drawn(0)  # a reading taken while it ran: not drawn, nothing told
    assert runner.drawn(1) and console.said[-1] == "restarted"
    assert runner.acting is None


def test_a_question_that_lapses_takes_only_its_own_words_off_the_status_line() -> None:
    # Its timer cleared the status line whatever it said by then: a result said since (a
    # call started, a reading that failed) went after less than its time.
    backend = FakeBackend()
    runner, console, calls = _runner(backend)
    runner.restart()
    console.say("simulated call started")
    [(_delay, disarm)] = calls.timers
    disarm()
    assert console.said[-1] == "simulated call started"
    runner.restart()  # the question lapsed: r asks again, and its timer takes it off
    calls.timers[-1][1]()
    assert console.said[-1] is None


def test_an_action_begun_before_the_last_ones_reading_says_that_outcome_first() -> None:
    # A second key within a second of a restart's end: the restart's "restarted", waiting for
    # a reading taken after its end, came later over the new action's words (or was lost).
    backend = FakeBackend()
    runner, console, calls = _runner(backend)
    runner.start("restart", lambda progress: backend.restart(progress=progress))
    runner.finished([m for m in calls.posted if isinstance(m, ActionFinished)][-1])
    assert console.said[-1] != "restarted"  # its reading is not drawn yet
    runner.start("stop", lambda progress: backend.stop(progress=progress))
    # The new action's first words after it, not over it: the outcome is read.
    assert console.said[-2:] == ["restarted", "restarted · stop: stopping…"]
    runner.finished([m for m in calls.posted if isinstance(m, ActionFinished)][-1])
    assert runner.drawn(console.reads_asked) and console.said[-1] == "vLLM stopped."


def _restarted(backend: FakeBackend) -> tuple[ActionRunner, Console, AtOnce]:
    """A runner whose restart has just ended, the reading asked for at its end not shown."""
    runner, console, calls = _runner(backend)
    runner.start("restart", lambda progress: backend.restart(progress=progress))
    runner.finished([m for m in calls.posted if isinstance(m, ActionFinished)][-1])
    assert runner.acting == "restarting" and "restarted" not in console.said
    return runner, console, calls


def test_an_outcome_whose_reading_hangs_is_said_once_the_wait_is_over() -> None:
    # The reading asked for at a restart's end hung (a dead source): "restarted" waited for
    # it, and the person saw nothing of the end until it came, if ever.
    backend = FakeBackend()
    runner, console, calls = _restarted(backend)
    [(delay, due)] = calls.timers
    assert delay == OUTCOME_WAIT_S
    due()  # the console's clock has not moved: it waits on
    assert "restarted" not in console.said and runner.acting == "restarting"
    console.clock += OUTCOME_WAIT_S
    calls.timers[-1][1]()
    assert console.said[-1] == "restarted"
    # Never the state of a frame read before the end beside it: not read yet.
    assert runner.acting == NOT_READ_YET
    assert not runner.drawn(0)  # a reading taken while it ran: still not drawn
    said = len(console.said)
    assert runner.drawn(console.reads_asked)  # the one taken after the end, at last
    assert runner.acting is None and len(console.said) == said  # told once


def test_an_outcome_whose_reading_fails_is_said_and_the_failure_after_it() -> None:
    backend = FakeBackend()
    runner, console, _calls = _restarted(backend)
    runner.read_failed(0)  # a reading taken while it ran failed: it still waits
    assert "restarted" not in console.said
    runner.read_failed(console.reads_asked)
    assert console.said[-1] == "restarted" and runner.acting == NOT_READ_YET
    console.say("reading failed (gone)", after=True)  # as the console says a failure
    console.clock += 1.0
    console.say("reading failed (gone)", after=True)  # and again a second later
    assert console.said[-1] == "restarted · reading failed (gone)"
    assert runner.drawn(console.reads_asked) and runner.acting is None


def test_s_while_a_start_loads_stops_the_load() -> None:
    backend = FakeBackend()
    runner, _console, calls = _runner(backend)
    runner.start("start", lambda progress: backend.start(progress=progress))
    runner.start_stop()  # while the start runs: s stops the load instead
    assert backend.calls == [("start",), ("stop",)]
    assert [m.action for m in calls.posted if isinstance(m, ActionFinished)] == ["start", "stop"]


def test_quitting_with_the_server_up_asks_and_stop_closes_it_then_exits() -> None:
    backend = FakeBackend()
    runner, console, calls = _runner(backend)
    runner.quit_console()
    [(dialog, chosen)] = calls.screens
    assert isinstance(dialog, QuitDialog)
    calls.screen = dialog
    runner.quit_console()  # asked already: no second question
    assert len(calls.screens) == 1
    chosen("stop")
    assert backend.calls[-1] == ("close", True) and calls.exited == 0
    assert console.said[-1] == "stopping vLLM, then quitting…"


def test_a_call_that_cannot_be_toggled_is_said_and_told_in_a_toast() -> None:
    class NoWorld(FakeBackend):
        def toggle_call(self) -> bool:
            raise ConnectionRefusedError("the simulated machine's socket is gone")

    runner, console, calls = _runner(NoWorld())
    runner.toggle_call()
    assert console.said[-1] is not None and console.said[-1].startswith(
        "simulated call not changed"
    )
    assert calls.toasts == ["ConnectionRefusedError: the simulated machine's socket is gone"]
