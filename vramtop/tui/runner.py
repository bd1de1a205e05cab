"""What the console does when asked: the actions on the server (restart, relaunch, start and
stop, the headroom what-if), the simulated call, and quitting.

Each long action runs in a thread worker of the App and reports progress as messages
(`ActionProgress`, `ActionFinished`), so a slow server never blocks a key. The App's
`action_*` methods and message handlers call in here; this object keeps the acting state
(what runs, a load being stopped, a restart armed, the flags a relaunch is to take, quitting,
the farewell) and nothing the console shows. What it asks of the App is `ActionHost` (the
console) and `AppCalls` (Textual's workers, timers, screens, messages; action_host.py); the
runner never imports the App, which builds it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING

from vramtop import locations
from vramtop.core.model import ServerState
from vramtop.core.server_events import ServerAction
from vramtop.core.step_report import under_way_words
from vramtop.outcomes import ActionResult
from vramtop.tui.keys import LAUNCHED, UNDER_WAY
from vramtop.tui.messages import ActionFinished, ActionProgress

if TYPE_CHECKING:
    # The dialogs are imported when a key opens them, the diagnosis' modules when a reading
    # is shown: the first frame waits for every module imported before it.
    from vramtop.core.findings import Finding
    from vramtop.core.headroom.terms import HeadroomInputs
    from vramtop.core.remedy import FlagChange
    from vramtop.tui.action_host import ActionHost, AppCalls
    from vramtop.tui.screens.quit_dialog import QuitChoice
    from vramtop.tui.whatif import Machine, RelaunchChoice

log = logging.getLogger(__name__)

RESTART_CONFIRM_S = 5.0
# What `r` says behind a front door, where no request is lost and none is asked about.
DOOR_HOLDS = "the front door holds the agent's requests"
# What `s` says behind a front door: the requests running finish before the server stops.
DOOR_LETS_FINISH = "the door lets the requests finish"

# An action's outcome waits this long (on the console's clock) for a reading taken after its
# end, to be said beside the state that reading shows; a reading that hangs (a slow or dead
# source) does not hold it back longer: it is said then, and the header says the state is
# not read yet (`NOT_READ_YET`) until such a reading is shown.
OUTCOME_WAIT_S = 1.0
NOT_READ_YET = "not read yet"

Call = Callable[[Callable[[str], None]], ActionResult]


@dataclass(frozen=True)
class _Ended:
    """An action that has ended: its outcome, the read asked for at its end (a reading that
    answers an earlier ask was taken before it), when it ended, and whether the outcome has
    been said (it waited `OUTCOME_WAIT_S` for that reading in vain)."""

    action: str
    result: ActionResult
    asked_at_end: int
    at: float
    told: bool = False


class ActionRunner:
    """The console's actions, one at a time, each in a thread worker of the App."""

    def __init__(self, app: ActionHost, calls: AppCalls) -> None:
        self._app = app
        self._calls = calls
        self.busy: str | None = None  # the action running now, if any
        self._load_stop_asked = False  # s during a start: the load is being stopped
        # The action a first press asked about (its requests would be cut off), until a
        # second press confirms it or RESTART_CONFIRM_S passes.
        self._armed: str | None = None
        self._proposal: FlagChange | None = None  # the what-if's flags, for the relaunch
        self.quitting = False
        self._quit_stopping = False  # quitting, with the server stopped first
        # Printed once the console has gone: where the server left running is, how to stop it.
        self.farewell: str | None = None
        # A start, restart or relaunch under way: its phase's words, when it began and the
        # last step's total (None: none seen), for the status line's seconds.
        self._step: tuple[str, float, float | None] | None = None
        # What the phase's own words last put on the status line: only those are counted on.
        # Words an action begins with instead ("the front door holds the agent's requests")
        # stay until its first phase.
        self._step_said: str | None = None
        # An action that has ended, until a reading taken after its end is shown: the outcome
        # is told with that reading (one taken while the action ran would put the server's
        # state of then beside it), or after OUTCOME_WAIT_S without it.
        self._ended: _Ended | None = None

    def _worker(self, group: str, work: Callable[[], object]) -> None:
        # One worker at a time in each group, as Textual's @work(exclusive=True) runs them.
        self._calls.run_worker(
            work, name=group, group=group, exclusive=True, thread=True, exit_on_error=False
        )

    # -- restart ---------------------------------------------------------------------------
    def restart(self) -> None:
        app = self._app
        backend = app.backend
        state = app.shown.server_state
        if state is None or state is ServerState.STOPPED:
            # Nothing runs to restart: r starts it, or says why it cannot yet.
            self._armed = None
            if state is None:
                app.say("restart: the server's state is not read yet: try again")
                app.render_header()
            elif self.busy is None:
                self.start(
                    "start",
                    lambda progress: backend.start(progress=progress),
                    words="restart: the server was stopped: starting it",
                )
            return
        if backend.front_door is not None:
            # Behind a front door a restart lets the requests in flight finish (up to the
            # profile's drain_s) and holds new ones: nothing is lost, nothing to confirm.
            self._armed = None
            if self.busy is None:
                self.start(
                    "restart",
                    lambda progress: backend.restart(progress=progress),
                    words=f"restart: {DOOR_HOLDS}",  # until its first phase
                )
            return
        running = self._requests_running()
        if running and not self._ask_again("restart", running):
            return
        # Confirmed with requests running: they are lost anyway, so the server is not given
        # its whole stop timeout to finish them (uvicorn waits for open connections).
        lost = running > 0
        self.start(
            "restart", lambda progress: backend.restart(progress=progress, requests_lost=lost)
        )

    def _requests_running(self) -> int:
        """The requests the server runs now: what a restart or a stop would cut off."""
        sample = self._app.shown.sample
        server = sample.server if sample else None
        # Only a server that answered this tick has requests to lose: a dead one's last
        # sample (kept, marked stale) counts none.
        fresh = server is not None and server.reachable and not server.stale
        metrics = server.metrics if server is not None and fresh else None
        return int(metrics.requests_running or 0) if metrics else 0

    def _ask_again(self, action: str, running: int) -> bool:
        """Whether `action` (restart, stop), which would cut `running` requests off, was
        asked for twice within RESTART_CONFIRM_S; the first press asks on the status line."""
        app = self._app
        if self._armed == action:
            self._armed = None
            return True
        self._armed = action
        key = app.key_of("restart" if action == "restart" else "start_stop")
        question = f"{running} request(s) running: press {key} again to {action}"
        app.say(question, news=False)
        app.render_header()
        self._calls.set_timer(RESTART_CONFIRM_S, partial(self._disarm, action, question))
        return False

    def _disarm(self, action: str, question: str) -> None:
        if self._armed == action:
            self._armed = None
            if self._app.shown.activity == question:  # not what was said since (a result)
                self._app.say(None)
            self._app.render_header()

    # -- relaunch and the what-if ----------------------------------------------------------
    def _current_budget(self) -> float | None:
        """The budget the server runs with: the one vLLM reports, else the one it was given."""
        from vramtop.core import sample_facts

        sample = self._app.shown.sample
        return sample_facts.util(sample) if sample else None

    def _machine(self) -> Machine:
        from vramtop.tui.whatif import Machine

        sample = self._app.shown.sample
        if sample is None:
            return Machine()
        device = sample.gpu.devices[0] if sample.gpu.devices else None
        return Machine(
            total_bytes=device.total_bytes if device else None,
            desktop_bytes=sample.split.desktop_bytes if sample.split else None,
            device_kind=sample.startup.device_kind if sample.startup else None,
        )

    def relaunch(self, suggested: float | None = None) -> None:
        current = self._current_budget()
        remedy_util, why = _remedy_util(self._app.shown.findings)
        back = self._app.way_back_offer if suggested is None and remedy_util is None else None
        if back is not None:
            # The way back after a call: the profile's own flags again (its --max-model-len
            # judged in the fits-now check and relaunched with the budget chosen).
            remedy_util, why = back.budget, "the desktop is back to its size before the call"
            self._proposal = back.flags
        value = suggested or remedy_util or current or 0.9
        if suggested is not None:
            why = "proposed in the headroom panel"
        from vramtop.tui.screens.budget_dialog import BudgetDialog

        self._calls.push_screen(
            BudgetDialog(
                value,
                current,
                self._relaunch_inputs(),
                why=why,
                machine=self._machine(),
                kept=self._proposal,
            ),
            self._relaunch_chosen,
        )

    def _relaunch_inputs(self) -> HeadroomInputs | None:
        """The model the dialog judges budgets by: the server's, with the flags a what-if
        proposal changes (its --max-model-len, its KV dtype)."""
        from dataclasses import replace

        inputs, proposal = self._app.shown.headroom_inputs, self._proposal
        if inputs is None or proposal is None:
            return inputs
        if proposal.max_model_len is not None:
            inputs = replace(inputs, max_model_len=proposal.max_model_len)
        if proposal.kv_cache_dtype is not None:
            inputs = replace(inputs, kv_cache_dtype=proposal.kv_cache_dtype)
        return inputs

    def _relaunch_chosen(self, choice: RelaunchChoice | None) -> None:
        self._proposal = None
        if choice is None:
            return
        # Confirmed against the free memory: only vLLM itself checks (a failed start goes back
        # to the previous flags). None: the backend's own precheck.
        precheck = _no_precheck if choice.forced else None
        backend = self._app.backend
        from vramtop.core.remedy import RelaunchOrder

        self.start(
            "relaunch",
            lambda progress: backend.relaunch(
                RelaunchOrder(choice.change, precheck=precheck), progress=progress
            ),
        )

    def headroom(self) -> None:
        from vramtop.tui.screens.headroom_screen import HeadroomScreen, no_terms

        app = self._app
        shown = app.shown
        remedy_util, why = _remedy_util(shown.findings)
        self._calls.push_screen(
            HeadroomScreen(
                shown.headroom_inputs,
                self._current_budget(),
                shown.desktop_peak_bytes,
                app.settings.min_desktop_headroom_gib,
                launch_util=app.backend.launch_budget,
                suggested=(remedy_util, why or "") if remedy_util is not None else None,
                no_terms_why=no_terms(shown.sample),
            ),
            self._headroom_chosen,
        )

    def _headroom_chosen(self, proposal: FlagChange | None) -> None:
        if proposal is None:
            return
        self._proposal = proposal
        self.relaunch(suggested=proposal.budget)

    # -- start and stop --------------------------------------------------------------------
    def start_stop(self) -> None:
        backend = self._app.backend
        if self.busy in LAUNCHED:
            self._stop_load()
            return
        if self._app.shown.server_state in (ServerState.RUNNING, ServerState.STARTING):
            if backend.front_door is not None:
                # The door lets the requests in flight finish before the server stops.
                self._armed = None
                if self.busy is None:
                    self.start(
                        "stop",
                        lambda progress: backend.stop(progress=progress),
                        words=f"stop: {DOOR_LETS_FINISH}",
                    )
                return
            running = self._requests_running()
            if running and not self._ask_again("stop", running):
                return
            self.start("stop", lambda progress: backend.stop(progress=progress))
        else:
            self.start("start", lambda progress: backend.start(progress=progress))

    def _stop_load(self) -> None:
        """s while a start (restart, relaunch) waits for the server: stop it. The waiting
        start gives way once the stop has ended the server (supervisor/following.py)."""
        if self._load_stop_asked:
            return
        self._load_stop_asked = True
        self._app.say("stop: stopping the server being started…", news=False)
        self._app.render_header()
        backend = self._app.backend
        # A group of its own: the start it stops still runs in the "action" group.
        self._worker(
            "stop-load",
            partial(self._run, "stop", lambda progress: backend.stop(progress=progress)),
        )

    # -- the simulated call ----------------------------------------------------------------
    def toggle_call(self) -> None:
        self._worker("call", self._toggle_call)

    def _toggle_call(self) -> None:
        app = self._app
        try:
            on = app.backend.toggle_call()
        except Exception as error:  # the simulated machine has gone away: tell, carry on
            log.exception("toggling the simulated call failed")
            self._calls.call_from_thread(
                self._call_toggled, None, f"{type(error).__name__}: {error}"
            )
            return
        self._calls.call_from_thread(self._call_toggled, on)

    def _call_toggled(self, on: bool | None, error: str | None = None) -> None:
        app = self._app
        if error is not None:
            # The reason is long (a socket path): in a toast, which wraps; the header has room
            # for the outcome only.
            app.say(f"simulated call not changed (see {locations.own_log_file().name})")
            self._calls.notify(error, title="Simulated call", severity="error", timeout=8)
        else:
            app.say("simulated call started" if on else "simulated call ended")
        app.render_header()

    # -- quitting --------------------------------------------------------------------------
    def quit_console(self) -> None:
        from vramtop.tui.screens.quit_dialog import QuitDialog

        app = self._app
        if isinstance(self._calls.screen, QuitDialog) or self.quitting:
            return  # asked already (a second Ctrl+Q while the question is up)
        if self._server_to_leave():
            self._calls.push_screen(QuitDialog(), self._quit_chosen)
            return
        # No choice to offer: nothing here that vramtop could stop. The demo's simulated
        # machine goes with the console, since no server of it is left to keep it for.
        self._quit(stop_server=app.backend.demo)

    @property
    def acting(self) -> str | None:
        """The header's state word while an action runs: the action's own ("restarting",
        "stopping"), never the state of a moment of it ("● stopped" beside "restart:
        launching…"); None: no action runs, and the server's own state stands. A stop asked
        for during a load, or on quitting, is the action then."""
        if self._load_stop_asked or self._quit_stopping:
            return UNDER_WAY["stop"]
        ended = self._ended
        if self.busy is None and ended is not None:
            # Until a reading taken after its end is shown: its own word, or, once its
            # outcome is said without that reading, that the state is not read yet.
            return NOT_READ_YET if ended.told else UNDER_WAY[ended.action]
        return UNDER_WAY.get(self.busy) if self.busy is not None else None

    def _server_to_leave(self) -> bool:
        """Whether quitting has a choice: a server vramtop may stop is up (or its state is
        not known yet, or an action is bringing one up)."""
        app = self._app
        if not app.backend.can_act:
            return False  # watching a URL or a recording: nothing of ours to stop
        if app.shown.sample is None or self.busy in ("start", "restart", "relaunch"):
            return True
        return app.shown.server_state in (ServerState.STARTING, ServerState.RUNNING)

    def _quit_chosen(self, choice: QuitChoice | None) -> None:
        if choice is None:
            return
        if choice == "leave":
            from vramtop.tui.screens.quit_dialog import left_running

            backend = self._app.backend
            self.farewell = left_running(
                self._app.shown.sample,
                demo=backend.demo,
                profile=backend.profile_name,
                wsl=backend.wsl,
                front_door=backend.front_door,
            )
        self._quit(stop_server=choice == "stop")

    def _quit(self, *, stop_server: bool) -> None:
        app = self._app
        self.quitting = True
        state = app.shown.server_state
        stopping = stop_server and state in (ServerState.STARTING, ServerState.RUNNING)
        self._quit_stopping = stopping
        app.say("stopping vLLM, then quitting…" if stopping else "quitting…", news=False)
        app.render_header()
        self._worker("close", partial(self._close, stop_server))

    def _close(self, stop_server: bool) -> None:
        app = self._app
        try:
            app.backend.close(stop_server=stop_server)
        except Exception:
            log.exception("close failed")
        self._calls.call_from_thread(self._calls.exit, 0)

    # -- running one action ----------------------------------------------------------------
    def start(self, name: str, call: Call, *, words: str | None = None) -> None:
        """Run `call` as action `name` unless one runs already; `words`: what the status line
        says until its first phase, in place of its own ("restart: restarting…")."""
        if self.busy is not None:
            return
        app = self._app
        ended, self._ended = self._ended, None
        if ended is not None and not ended.told:
            # The last one's outcome, its reading not drawn yet: said now (not later, over
            # this one's words, nor lost), and this one's first words after it.
            self._tell(ended.action, ended.result)
        self.busy = name
        self._step = (UNDER_WAY[name], app.now(), None) if name in LAUNCHED else None
        self._step_said = f"{name}: {UNDER_WAY[name]}…"
        app.say(words or self._step_said, news=False, after=ended is not None)
        app.render_header()
        self._calls.refresh_bindings()
        self._worker("action", partial(self._run, name, call))

    def _run(self, name: str, call: Call) -> None:
        """Run `call` on this (worker) thread: its steps and its result go back as messages."""
        post = self._calls.post_message

        def progress(phase: str) -> None:
            post(ActionProgress(name, phase))

        if name in LAUNCHED:
            post(ActionProgress(name, UNDER_WAY[name], self._last_total()))

        try:
            result = call(progress)
        except Exception as error:
            log.exception("%s failed", name)
            result = ActionResult(ok=False, message=f"{name} failed: {error}")
        post(ActionFinished(name, result))

    def progress(self, message: ActionProgress) -> None:
        if self._load_stop_asked and message.action != "stop":
            return  # the load being stopped: its steps are no longer the news
        if self._step is not None and message.action == self.busy:
            _, began, expected = self._step
            if message.expected_s is not None:
                expected = message.expected_s
            if message.phase == UNDER_WAY.get(message.action):
                # The first, from the worker: the time to expect, not a phase to say.
                self._step = (message.phase, began, expected)
                self._app.render_header()
                return
            self._step = (message.phase, began, expected)
        self._step_said = f"{message.action}: {message.phase}…"
        self._app.say(self._step_said, news=False)
        self._app.render_header()

    def count_seconds(self) -> None:
        """The status line of a step under way, its seconds as of now (each header drawn)."""
        if self._step is None or self.busy is None:
            return
        app = self._app
        phase, began, expected = self._step
        if app.shown.activity != self._step_said:
            return  # something else is said meanwhile (the action's first words, quitting…)
        words = under_way_words(self.busy, phase, max(0.0, app.now() - began), expected)
        if words != app.shown.activity:
            self._step_said = words
            app.say(words, news=False)

    def _last_total(self) -> float | None:
        """The profile's last step's total seconds, from its timeline (read on the worker)."""
        profile = self._app.backend.profile_name
        if profile is None:
            return None
        from vramtop.supervisor.step_phases import recorded_last_total

        return recorded_last_total(profile)

    def finished(self, message: ActionFinished) -> None:
        action, result = message.action, message.result
        stopping_load = self._load_stop_asked
        if stopping_load and message.action == ServerAction.STOP and self.busy in LAUNCHED:
            # The stop of a load ended first: the start waiting gives way next and says it
            # (a stop that failed says so now, and the load goes on).
            self._load_stop_asked = result.ok
            if not result.ok:
                self._tell(message.action, result)
            return
        if stopping_load and message.action in LAUNCHED:
            self._load_stop_asked = False
            if not result.ok:  # asked for, not a failure
                action = "stop"
                result = ActionResult(ok=True, message=f"{message.action} stopped while loading")
        self.busy = None
        self._step = None
        app = self._app
        self._ended = ended = _Ended(action, result, app.request_tick(), app.now())
        self._calls.set_timer(OUTCOME_WAIT_S, partial(self._outcome_due, ended))
        app.render_header()
        self._calls.refresh_bindings()

    def _outcome_due(self, ended: _Ended) -> None:
        """The outcome of `ended`, said once OUTCOME_WAIT_S have passed on the console's clock
        and no reading taken after its end has been shown (the one asked for hangs)."""
        if self._ended is not ended:
            return  # shown with its reading, or said as the next action began
        left = ended.at + OUTCOME_WAIT_S - self._app.now()
        if left > 0:  # the console's clock is behind the timer's (a test's own clock)
            self._calls.set_timer(left, partial(self._outcome_due, ended))
            return
        self._tell_unread(ended)

    def drawn(self, answers: int) -> bool:
        """Whether a reading that answers the asks up to `answers` is drawn: not one taken
        before the last action's end, which would show a state the action has left ("●
        starting" beside "restarted"). The first taken after it brings the outcome."""
        ended = self._ended
        if ended is None:
            return True
        if answers < ended.asked_at_end:
            return False
        self._ended = None
        if not ended.told:
            self._tell(ended.action, ended.result)
        return True

    def read_failed(self, answers: int) -> None:
        """A reading that answers the asks up to `answers` failed: if it was taken after the
        last action's end, the outcome waits no longer and is said now (the failure is said
        after it); the state stays not read until a reading taken after the end is shown."""
        ended = self._ended
        if ended is None or ended.told or answers < ended.asked_at_end:
            return
        self._tell_unread(ended)

    def _tell_unread(self, ended: _Ended) -> None:
        """`ended`'s outcome said before a reading taken after its end is shown; readings
        taken before the end are still not drawn after it (`drawn`)."""
        self._ended = replace(ended, told=True)
        self._tell(ended.action, ended.result)

    def _tell(self, action: str, result: ActionResult) -> None:
        """An action's outcome on the status line; a failure in a toast as well."""
        app = self._app
        done = LAUNCHED.get(action) if result.ok else None
        # A launch's result ("ready in 3.2 s (pid 5369)") is what the header shows already:
        # the status line says only that it is done.
        app.say(done or result.message)
        if not result.ok:
            # The message names the cause; the server's own lines (a traceback, often) stay in
            # the log panel, where they are highlighted, rather than in a toast over the screen.
            self._calls.notify(
                f"{result.message} · the server log shows its last lines",
                title=action,
                severity="error",
                timeout=10,
            )
        app.render_header()
        self._calls.refresh_bindings()


def _no_precheck(_change: FlagChange) -> str | None:
    return None


def _remedy_util(findings: tuple[Finding, ...]) -> tuple[float | None, str | None]:
    """The budget the open findings suggest (core's one rule: the first finding whose remedy
    names one), and which finding's it is, in words."""
    from vramtop.core.budget import suggested_relaunch_budget
    from vramtop.core.findings import headline

    for finding in findings:
        util = suggested_relaunch_budget((finding,))
        if util is not None:
            return util, f"suggested for: {headline(finding.kind)}"
    return None, None
