"""What the console does when asked: the actions on the server (restart, relaunch, start and
stop, the headroom what-if), the simulated call, and quitting.

Each long action runs in its own thread worker and reports progress as messages, so a slow
server never blocks a key.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from textual import work

from vramtop import locations
from vramtop.core.model import ServerState
from vramtop.outcomes import ActionResult
from vramtop.tui.keys import LAUNCHED, UNDER_WAY
from vramtop.tui.messages import ActionFinished, ActionProgress
from vramtop.tui.showing import ShowingConsole

if TYPE_CHECKING:
    # The dialogs are imported when a key opens them, the diagnosis' modules when a reading
    # is shown: the first frame waits for every module imported before it.
    from vramtop.core.findings import Finding
    from vramtop.core.headroom.terms import HeadroomInputs
    from vramtop.tui.screens.headroom_screen import Proposal
    from vramtop.tui.screens.quit_dialog import QuitChoice
    from vramtop.tui.whatif import Machine, RelaunchChoice

log = logging.getLogger(__name__)

RESTART_CONFIRM_S = 5.0


class ActingConsole(ShowingConsole):
    """The console's actions (the keys and the palette call them)."""

    def action_restart(self) -> None:
        server = self.sample.server if self.sample else None
        # Only a server that answered this tick has requests to lose: a dead one's last
        # sample (kept, marked stale) counts none.
        fresh = server is not None and server.reachable and not server.stale
        metrics = server.metrics if server is not None and fresh else None
        running = int(metrics.requests_running or 0) if metrics else 0
        if running and not self._restart_armed:
            self._restart_armed = True
            again = self.key_of("restart")
            self._say(f"{running} request(s) running: press {again} again to restart", news=False)
            self._render_header()
            self.set_timer(RESTART_CONFIRM_S, self._disarm_restart)
            return
        self._restart_armed = False
        # Confirmed with requests running: they are lost anyway, so the server is not given
        # its whole stop timeout to finish them (uvicorn waits for open connections).
        lost = running > 0
        self._start_action(
            "restart", lambda progress: self.backend.restart(progress=progress, requests_lost=lost)
        )

    def _disarm_restart(self) -> None:
        if self._restart_armed:
            self._restart_armed = False
            self._say(None)
            self._render_header()

    def _current_budget(self) -> float | None:
        """The budget the server runs with: the one vLLM reports, else the one it was given."""
        from vramtop.core import sample_facts

        return sample_facts.util(self.sample) if self.sample else None

    def _machine(self) -> Machine:
        from vramtop.tui.whatif import Machine

        sample = self.sample
        if sample is None:
            return Machine()
        device = sample.gpu.devices[0] if sample.gpu.devices else None
        return Machine(
            total_bytes=device.total_bytes if device else None,
            desktop_bytes=sample.split.desktop_bytes if sample.split else None,
            device_kind=sample.startup.device_kind if sample.startup else None,
        )

    def action_relaunch(self, suggested: float | None = None) -> None:
        current = self._current_budget()
        remedy_util, why = _remedy_util(self.findings)
        value = suggested or remedy_util or current or 0.9
        if suggested is not None:
            why = "proposed in the headroom panel"
        from vramtop.tui.screens.budget_dialog import BudgetDialog

        self.push_screen(
            BudgetDialog(value, current, self._relaunch_inputs(), why=why, machine=self._machine()),
            self._relaunch_chosen,
        )

    def _relaunch_inputs(self) -> HeadroomInputs | None:
        """The model the dialog judges budgets by: the server's, with the flags a what-if
        proposal changes (its --max-model-len, its KV dtype)."""
        from dataclasses import replace

        inputs, pending = self.headroom_inputs, self._pending_flags
        if inputs is None or not pending:
            return inputs
        changed = {k: v for k, v in pending.items() if k in ("max_model_len", "kv_cache_dtype")}
        return replace(inputs, **changed)

    def _relaunch_chosen(self, choice: RelaunchChoice | None) -> None:
        flags, self._pending_flags = self._pending_flags, {}
        if choice is None:
            return
        if choice.max_model_len is not None:
            # The budget's pool cannot hold the ceiling asked for: vLLM would refuse it.
            flags["max_model_len"] = choice.max_model_len
        if choice.forced:
            # Confirmed against the free memory: only vLLM itself checks (a failed start goes
            # back to the previous flags).
            flags["precheck"] = _no_precheck
        self._start_action(
            "relaunch",
            lambda progress: self.backend.relaunch(
                gpu_memory_utilization=choice.util, progress=progress, **flags
            ),
        )

    def action_start_stop(self) -> None:
        if self.busy in LAUNCHED:
            self._stop_load()
            return
        if self.state in (ServerState.RUNNING, ServerState.STARTING):
            self._start_action("stop", lambda progress: self.backend.stop(progress=progress))
        else:
            self._start_action("start", lambda progress: self.backend.start(progress=progress))

    def _stop_load(self) -> None:
        """s while a start (restart, relaunch) waits for the server: stop it. The waiting
        start gives way once the stop has ended the server (supervisor/following.py)."""
        if self._load_stop_asked:
            return
        self._load_stop_asked = True
        self._say("stop: stopping the server being started…", news=False)
        self._render_header()
        self._stop_load_worker()

    @work(thread=True, exclusive=True, exit_on_error=False, group="stop-load")
    def _stop_load_worker(self) -> None:
        # A group of its own: the start it stops still runs in the "action" group.
        self._run_action("stop", lambda progress: self.backend.stop(progress=progress))

    def action_headroom(self) -> None:
        from vramtop.tui.screens.headroom_screen import HeadroomScreen, no_terms

        remedy_util, why = _remedy_util(self.findings)
        self.push_screen(
            HeadroomScreen(
                self.headroom_inputs,
                self._current_budget(),
                self.desktop_peak_bytes,
                self.settings.min_desktop_headroom_gib,
                launch_util=self.backend.launch_budget,
                suggested=(remedy_util, why or "") if remedy_util is not None else None,
                no_terms_why=no_terms(self.sample),
            ),
            self._headroom_chosen,
        )

    def _headroom_chosen(self, proposal: Proposal | None) -> None:
        if proposal is None:
            return
        self._pending_flags = proposal.extra_flags()
        self.action_relaunch(suggested=proposal.util)

    def action_toggle_call(self) -> None:
        self._toggle_call_worker()

    @work(thread=True, exclusive=True, exit_on_error=False, group="call")
    def _toggle_call_worker(self) -> None:
        try:
            on = self.backend.toggle_call()
        except Exception as error:  # the simulated machine has gone away: tell, carry on
            log.exception("toggling the simulated call failed")
            self.call_from_thread(self._call_toggled, None, f"{type(error).__name__}: {error}")
            return
        self.call_from_thread(self._call_toggled, on)

    def _call_toggled(self, on: bool | None, error: str | None = None) -> None:
        if error is not None:
            # The reason is long (a socket path): in a toast, which wraps; the header has room
            # for the outcome only.
            self._say(f"simulated call not changed (see {locations.own_log_file().name})")
            self.notify(error, title="Simulated call", severity="error", timeout=8)
        else:
            self._say("simulated call started" if on else "simulated call ended")
        self._render_header()

    def action_quit_console(self) -> None:
        from vramtop.tui.screens.quit_dialog import QuitDialog

        if isinstance(self.screen, QuitDialog) or self._quitting:
            return  # asked already (a second Ctrl+Q while the question is up)
        if self._server_to_leave():
            self.push_screen(QuitDialog(), self._quit_chosen)
            return
        # No choice to offer: nothing here that vramtop could stop. The demo's simulated
        # machine goes with the console, since no server of it is left to keep it for.
        self._quit(stop_server=self.backend.demo)

    async def action_quit(self) -> None:
        """Textual's own quit (Ctrl+Q, and "Quit" in the palette): the same question as q,
        never an exit that leaves the server (or the simulated machine) unannounced."""
        self.action_quit_console()

    def _server_to_leave(self) -> bool:
        """Whether quitting has a choice: a server vramtop may stop is up (or its state is
        not known yet, or an action is bringing one up)."""
        if not self.backend.can_act:
            return False  # watching a URL or a recording: nothing of ours to stop
        if self.sample is None or self.busy in ("start", "restart", "relaunch"):
            return True
        return self.state in (ServerState.STARTING, ServerState.RUNNING)

    def _quit_chosen(self, choice: QuitChoice | None) -> None:
        if choice is None:
            return
        if choice == "leave":
            from vramtop.tui.screens.quit_dialog import left_running

            self.farewell = left_running(
                self.sample, demo=self.backend.demo, profile=self.backend.profile_name
            )
        self._quit(stop_server=choice == "stop")

    def _quit(self, *, stop_server: bool) -> None:
        self._quitting = True
        stopping = stop_server and self.state in (ServerState.STARTING, ServerState.RUNNING)
        self._say("stopping vLLM, then quitting…" if stopping else "quitting…", news=False)
        self._render_header()
        self._close_worker(stop_server)

    @work(thread=True, exclusive=True, exit_on_error=False, group="close")
    def _close_worker(self, stop_server: bool) -> None:
        try:
            self.backend.close(stop_server=stop_server)
        except Exception:
            log.exception("close failed")
        self.call_from_thread(self.exit, 0)

    def _start_action(
        self, name: str, call: Callable[[Callable[[str], None]], ActionResult]
    ) -> None:
        if self.busy is not None:
            return
        self.busy = name
        self._say(f"{name}: {UNDER_WAY[name]}…", news=False)
        self._render_header()
        self.refresh_bindings()
        self._action_worker(name, call)

    @work(thread=True, exclusive=True, exit_on_error=False, group="action")
    def _action_worker(
        self, name: str, call: Callable[[Callable[[str], None]], ActionResult]
    ) -> None:
        self._run_action(name, call)

    def _run_action(self, name: str, call: Callable[[Callable[[str], None]], ActionResult]) -> None:
        """Run `call` on this (worker) thread: its steps and its result go back as messages."""

        def progress(step: str) -> None:
            self.post_message(ActionProgress(name, step))

        try:
            result = call(progress)
        except Exception as error:
            log.exception("%s failed", name)
            result = ActionResult(ok=False, message=f"{name} failed: {error}")
        self.post_message(ActionFinished(name, result))

    def on_action_progress(self, message: ActionProgress) -> None:
        if self._load_stop_asked and message.action != "stop":
            return  # the load being stopped: its steps are no longer the news
        self._say(f"{message.action}: {message.step}…", news=False)
        self._render_header()

    def on_action_finished(self, message: ActionFinished) -> None:
        action, result = message.action, message.result
        stopping_load = self._load_stop_asked
        if stopping_load and message.action == "stop" and self.busy in LAUNCHED:
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
        self._tell(action, result)

    def _tell(self, action: str, result: ActionResult) -> None:
        """An action's outcome on the status line; a failure in a toast as well."""
        done = LAUNCHED.get(action) if result.ok else None
        # A launch's result ("ready in 3.2 s (pid 5369)") is what the header shows already:
        # the status line says only that it is done.
        self._say(done or result.message)
        if not result.ok:
            # The message names the cause; the server's own lines (a traceback, often) stay in
            # the log panel, where they are highlighted, rather than in a toast over the screen.
            self.notify(
                f"{result.message} · the server log shows its last lines",
                title=action,
                severity="error",
                timeout=10,
            )
        self._render_header()
        self.refresh_bindings()
        self.request_tick()


def _no_precheck(_changes: dict[str, str]) -> str | None:
    return None


def _remedy_util(findings: list[Finding]) -> tuple[float | None, str | None]:
    from vramtop.core.findings import headline

    for finding in findings:
        util = finding.remedy.gpu_memory_utilization
        if util is not None:
            return util, f"suggested for: {headline(finding.kind)}"
    return None, None
