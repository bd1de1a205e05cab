"""The console: one screen of live state, keys that act on the server, never a frozen frame.

Flow: a timer *triggers* a tick; the reader, a thread worker that lives as long as the
console, does the blocking reads through the Backend and posts a `SampleArrived`; the handler
only renders. Actions (restart, relaunch, …) run in
their own thread worker and report progress as messages, so a slow server never blocks a key.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.command import CommandPalette
from textual.containers import Container, Horizontal
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Footer
from textual.worker import get_current_worker

from vramtop import locations
from vramtop.core import sample_facts
from vramtop.core.events import Event
from vramtop.core.findings import Finding, headline
from vramtop.core.headroom.terms import HeadroomInputs
from vramtop.core.model import GpuReading, Rates, Sample, ServerState
from vramtop.machines.interface import ActionResult, Backend, Frame
from vramtop.settings import Settings
from vramtop.tui.commands import ConsoleCommands, ConsoleThemes
from vramtop.tui.messages import ActionFinished, ActionProgress, SampleArrived, TickFailed
from vramtop.tui.themes import DEFAULT_THEME, VARIABLE_DEFAULTS, load_themes
from vramtop.tui.widgets.console_header import ConsoleHeader
from vramtop.tui.widgets.finding_banner import DEFAULT_KEYS as BANNER_KEYS
from vramtop.tui.widgets.finding_banner import FindingBanner
from vramtop.tui.widgets.kv_pool_panel import KvPoolPanel
from vramtop.tui.widgets.server_log import ServerLog
from vramtop.tui.widgets.text_panel import TextPanel
from vramtop.tui.widgets.throughput_panel import ThroughputPanel, normal_origin
from vramtop.tui.widgets.vram_split_panel import VramSplitPanel

if TYPE_CHECKING:
    # The screens a key opens are imported when it is pressed: the first frame waits for
    # every module imported before it (the timeline's table alone is Textual's DataTable).
    from vramtop.tui.screens.headroom_screen import Proposal
    from vramtop.tui.screens.quit_dialog import QuitChoice
    from vramtop.tui.whatif import Machine

log = logging.getLogger(__name__)

HISTORY = 240  # samples kept for the sparklines: four minutes at 1 Hz
LOG_TAIL = 300
RESTART_CONFIRM_S = 5.0
# A result ("simulated call started", "ready in 0.6 s") is news for this long, then it goes:
# left up for minutes it reads as if it were still happening.
RESULT_SHOWN_S = 15.0
# Below either, panels lose their sparklines and the log: still every number, no crash.
COMPACT_WIDTH = 70
COMPACT_HEIGHT = 22
# Below this, the finding banner's details put the evidence ladder on one line.
SHORT_HEIGHT = 36
# Once the console has started, what start-up built (modules, styles, widgets) is set aside
# from the garbage collector (see `_set_aside_start_up`).
SETTLE_S = 1.0
# The reader looks this often whether it was cancelled, should the console end without
# waking it (it is woken on unmount).
READER_CHECK_S = 1.0

# (binding id, key, action, footer label, palette title, help text)
ACTIONS: list[tuple[str, str, str, str, str, str]] = [
    (
        "restart",
        "r",
        "restart",
        "Restart",
        "Restart vLLM",
        "restart now (asks once if requests are running)",
    ),
    (
        "relaunch",
        "b",
        "relaunch",
        "Budget",
        "Relaunch with another budget",
        "relaunch with an adjusted --gpu-memory-utilization",
    ),
    (
        "start_stop",
        "s",
        "start_stop",
        "Start/stop",
        "Start or stop vLLM",
        "start the server, or stop it",
    ),
    (
        "headroom",
        "c",
        "headroom",
        "Headroom",
        "Headroom calculator",
        "what-if: budget vs desktop headroom and KV pool",
    ),
    (
        "timeline",
        "e",
        "timeline",
        "Events",
        "Event timeline",
        "starts, restarts, relaunches, findings",
    ),
    (
        "details",
        "d",
        "toggle_details",
        "Details",
        "Show or hide the finding's details",
        "show or hide the open finding's evidence ladder",
    ),
    (
        "focus_log",
        "l",
        "focus_log",
        "Log",
        "Focus the server log",
        "move to the server log (scroll with arrows)",
    ),
    (
        "search_log",
        "slash",
        "search_log",
        "Search",
        "Search the server log",
        "filter the server log",
    ),
    (
        "toggle_call",
        "v",
        "toggle_call",
        "Call",
        "Start or end a simulated call",
        "demo: start or end a simulated video call",
    ),
    ("cycle_theme", "t", "cycle_theme", "Theme", "Next theme", "cycle through the themes"),
    ("help", "question_mark", "help", "Help", "Help: keys", "this help"),
    (
        "quit",
        "q",
        "quit_console",
        "Quit",
        "Quit vramtop",
        "quit (asks whether to leave vLLM running)",
    ),
]
# What the status line says once a launch succeeded (the header has its pid and ready time).
LAUNCHED = {"start": "started", "restart": "restarted", "relaunch": "relaunched"}
KEY_DISPLAY = {"slash": "/", "question_mark": "?"}
DEFAULT_KEYS = {binding_id: key for binding_id, key, *_rest in ACTIONS}
# d (details) is offered by the banner itself, the only time it does anything.
FOOTER_HIDDEN = {"focus_log", "cycle_theme", "search_log", "details"}


class VramtopApp(App[int]):
    # Absolute: a subclass in another module (benches, tests) must find it too.
    CSS_PATH = Path(__file__).parent / "app.tcss"
    TITLE = "vramtop"
    COMMANDS: ClassVar[set[Any]] = App.COMMANDS | {ConsoleCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            key,
            action,
            label,
            id=binding_id,
            show=binding_id not in FOOTER_HIDDEN,
            key_display=KEY_DISPLAY.get(key),
        )
        for binding_id, key, action, label, _title, _help in ACTIONS
    ]

    def __init__(
        self,
        backend: Backend,
        settings: Settings | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.backend = backend
        self.settings = settings or Settings()
        self._clock = clock
        self.frame = Frame(Sample(t=0.0, gpu=GpuReading(source="none", error="no sample yet")))
        self.sample: Sample | None = None
        self.findings: list[Finding] = []
        self.events: list[Event] = []
        self.headroom_inputs: HeadroomInputs | None = None
        self.baseline: Rates | None = None
        self.normal_origin: str | None = None
        self.busy: str | None = None  # the action running now, if any
        self.activity: str | None = None  # one line: progress or the last action's result
        self._activity_until: float | None = None  # when a result stops being news
        self.desktop_peak_bytes: int | None = None
        self._generation: deque[float] = deque(maxlen=HISTORY)
        self._prompt: deque[float] = deque(maxlen=HISTORY)
        self._kv_usage: deque[float] = deque(maxlen=HISTORY)
        # Reads asked for by the timer (and after actions) and answered by the reader: counted
        # so that an ask made while a read runs gets a read of its own, after it.
        self._reads_asked = 0
        self._reads_answered = 0
        self._read_wanted = threading.Event()
        self._closing = False
        self._restart_armed = False
        self._theme_names: list[str] = []
        self._keys: dict[str, str] = {}  # binding id -> key(s), as remapped in the settings
        self._pending_flags: dict[str, Any] = {}
        self._quitting = False
        self._ended = False  # a replay reached the end of its file
        self._banner_details = False  # the finding banner's ladder, shown on demand (d)
        # Printed once the console has gone: where the server left running is, how to stop it.
        self.farewell: str | None = None

    # -- layout --------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        # Each frame, Textual asks every widget whose container overlaps what changed for
        # its lines, and the screen overlaps everything. The log and the footer share a
        # container of their own: a tick that changes neither (most do) skips both.
        yield ConsoleHeader()
        yield FindingBanner()
        yield VramSplitPanel(classes="panel")
        with Horizontal(id="middle"):
            yield KvPoolPanel(classes="panel")
            yield ThroughputPanel(classes="panel")
        with Container(id="bottom"):
            yield ServerLog(id="server-log")
            yield Footer(compact=True)

    def on_mount(self) -> None:
        # Found once: the panels are drawn every tick, and a query walks the screen each time.
        self._header = self.query_one(ConsoleHeader)
        self._banner = self.query_one(FindingBanner)
        self._vram = self.query_one(VramSplitPanel)
        self._kv = self.query_one(KvPoolPanel)
        self._throughput = self.query_one(ThroughputPanel)
        self._server_log = self.query_one(ServerLog)
        self._install_themes()
        if self.settings.keys:
            self._keys = dict(self.settings.keys)
            self.set_keymap(self._keys)
        self._render_header()
        self._reader()
        self._ticker = self.set_interval(self.settings.interval_s, self.request_tick)
        # The first frame comes first: a read (or a start) begun now runs in its thread while
        # the layout is drawn, and the person waits for both.
        self.call_after_refresh(self._after_first_frame)
        self.set_timer(SETTLE_S, _set_aside_start_up)

    def _after_first_frame(self) -> None:
        self.request_tick()
        # Crash settling and automatic restarts on a thread of their own, every second: a
        # tick only reads, so it never waits on them (nor on a stop under way).
        self.backend.keep_house()
        if self.backend.autostart:
            # The demo (and a profile with no server yet) starts vLLM here, in a worker, so
            # the console shows the loading progress instead of waiting before it opens.
            self._start_action("start", lambda progress: self.backend.start(progress=progress))

    def on_resize(self, event: Resize) -> None:
        compact = event.size.width < COMPACT_WIDTH or event.size.height < COMPACT_HEIGHT
        if compact != self.screen.has_class("-compact"):
            self.screen.set_class(compact, "-compact")
            for panel in self.query(TextPanel):
                panel.redraw()

    def get_css_variables(self) -> dict[str, str]:
        variables = super().get_css_variables()
        # A theme without vramtop's own variables still gets a readable VRAM bar.
        fallback = {
            "vram-server": variables.get("primary", "blue"),
            "vram-desktop": variables.get("warning", "yellow"),
            "vram-free": variables.get("foreground-darken-3", variables.get("panel", "grey")),
            "vram-budget": variables.get("error", "red"),
        }
        return {**{k: fallback[k] for k in VARIABLE_DEFAULTS}, **variables}

    @property
    def theme_names(self) -> tuple[str, ...]:
        """vramtop's themes, in the order `t` cycles through them (the palette lists these)."""
        return tuple(self._theme_names)

    def _install_themes(self) -> None:
        loaded = load_themes()
        for theme in loaded.themes:
            self.register_theme(theme)
        self._theme_names = sorted(t.name for t in loaded.themes) or [self.theme]
        for notice in loaded.notices:
            self.notify(notice, title="Theme", severity="warning", timeout=8)
        wanted = self.settings.theme
        if wanted in self._theme_names:
            self.theme = wanted
        else:
            if DEFAULT_THEME in self.available_themes:
                self.theme = DEFAULT_THEME
            self.notify(
                f"Theme {wanted!r} was not found or could not be read; using {self.theme}.",
                title="Theme",
                severity="warning",
                timeout=8,
            )

    # -- ticks ---------------------------------------------------------------------------
    def request_tick(self) -> None:
        """Ask the reader for a read. Asks made while a read runs become one read after it:
        a hanging source never piles reads up."""
        self._reads_asked += 1
        self._read_wanted.set()

    @property
    def reads_pending(self) -> bool:
        """A read was asked for and its sample has not been shown yet."""
        return self._reads_answered < self._reads_asked

    def on_unmount(self) -> None:
        self._closing = True
        self._read_wanted.set()  # wake the reader so that it ends now

    @work(thread=True, exclusive=True, exit_on_error=False, group="tick")
    def _reader(self) -> None:
        """Reads when asked, for the console's whole life.

        One thread worker, woken by the timer through an Event. A worker started for each
        tick (a Worker, a task and an executor future, and three state messages handled on
        the event loop) cost the event loop about 0.6 ms a second: a tenth of the demo's
        CPU (bench/bench_console.py)."""
        worker = get_current_worker()
        wanted = self._read_wanted
        while not (self._closing or worker.is_cancelled):
            if not wanted.wait(READER_CHECK_S):
                continue
            wanted.clear()
            if self._closing:
                return
            # Every ask made up to here is answered by this read; a later one sets `wanted`
            # again and gets the next.
            self._read(self._reads_asked)

    def _read(self, answers: int) -> None:
        try:
            frame = self.backend.tick(LOG_TAIL)
            # Where the normal rate came from ('remembered 2 h ago', 'learned now', or that
            # none is known yet).
            origin = normal_origin(frame.normal_rate, self._clock())
        except Exception as error:  # a backend bug must not take the console down
            log.exception("tick failed")
            self.post_message(TickFailed(f"{type(error).__name__}: {error}", answers=answers))
            return
        # Everything goes back in the message: the app's state is written on the event loop
        # only, never from this thread while a dialog may be reading it.
        self.post_message(SampleArrived(frame, normal_origin=origin, answers=answers))

    def on_tick_failed(self, message: TickFailed) -> None:
        self._reads_answered = max(self._reads_answered, message.answers)
        self._say(f"reading failed ({message.reason}); details in {locations.own_log_file().name}")
        self._render_header()

    def on_sample_arrived(self, message: SampleArrived) -> None:
        self._reads_answered = max(self._reads_answered, message.answers)
        frame = message.frame
        sample = frame.sample
        previous = self.sample
        previous_state = previous.info.state if previous and previous.info else None
        self.frame = frame
        self.sample = sample
        self.findings = list(frame.findings)
        self.events = list(frame.events)
        self.headroom_inputs = frame.headroom_inputs
        self.baseline = frame.baseline
        self.normal_origin = message.normal_origin
        if previous is None or sample.t != previous.t:
            self._remember(sample)  # the same frame again (a replay's last) is no new history
        if self.backend.finished and not self._ended:
            self._end_of_recording(sample)
        self._render(sample, list(frame.log_lines))
        state = sample.info.state if sample.info else None
        if state != previous_state:
            self.refresh_bindings()

    def _end_of_recording(self, sample: Sample) -> None:
        """A replay reached the end of its file: the clock stops and the last frame stays."""
        self._ended = True
        self._ticker.stop()
        # (The header's first line says when it ended.)
        self._say(f"the clock stopped · {self.key_of('quit')} quits", news=False)

    def _remember(self, sample: Sample) -> None:
        rates = sample.rates
        self._generation.append(rates.generation_tps or 0.0)
        self._prompt.append(rates.prompt_tps or 0.0)
        metrics = sample.server.metrics if sample.server else None
        usage = metrics.kv_cache_usage if metrics else None
        self._kv_usage.append(usage or 0.0)
        desktop = sample.split.desktop_bytes if sample.split else None
        if desktop is not None:
            self.desktop_peak_bytes = max(desktop, self.desktop_peak_bytes or 0)

    def _render(self, sample: Sample, log_lines: list[str]) -> None:
        self._render_header()
        self._render_banner()
        self._vram.show(
            sample.gpu, sample.split, sample.info, sample.windows, util=sample_facts.util(sample)
        )
        self._kv.show(sample, tuple(self._kv_usage))
        self._throughput.show(
            sample,
            self.baseline,
            tuple(self._generation),
            tuple(self._prompt),
            origin=self.normal_origin,
        )
        notice = _log_notice(sample, self.key_of("start_stop"))
        self._server_log.show(log_lines, notice or self.frame.log_notice)

    def _render_banner(self) -> None:
        had = self._banner.has_class("-open")
        self._banner.show(
            self.findings,
            details=self._banner_details,
            short=self.size.height < SHORT_HEIGHT,
            can_act=self.backend.can_act,
            keys={name: self.key_of(name) for name in BANNER_KEYS},
        )
        if had != bool(self.findings):
            self.refresh_bindings()  # d (details) is offered while a finding is open

    def _say(self, text: str | None, *, news: bool = True) -> None:
        """Set the status line; `news` (a result) fades after RESULT_SHOWN_S, progress stays."""
        self.activity = text
        self._activity_until = self._clock() + RESULT_SHOWN_S if news and text else None

    def _render_header(self) -> None:
        until = self._activity_until
        if until is not None and self.busy is None and self._clock() >= until:
            self._say(None)
        self._header.show(
            self.sample,
            self._clock(),
            wsl=self.backend.wsl,
            call_on=self.frame.call_on,
            demo=self.backend.demo,
            profile=self.backend.profile_name,
            activity=self.activity,
        )

    # -- which keys make sense now --------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "toggle_call":
            return self.backend.demo  # False hides it: outside the demo there is no call
        if action == "toggle_details":
            return bool(self.findings)  # details of the open finding: hidden without one
        if action in ("restart", "relaunch", "start_stop"):
            if not self.backend.can_act:
                return False  # watching only (a URL, a recording): nothing to start or stop
            if self.busy is not None:
                return None  # shown dimmed: wait for the running action
            state = self.state
            if action == "restart" and state in (None, ServerState.STOPPED):
                return None
        return True

    @property
    def state(self) -> ServerState | None:
        return self.sample.info.state if self.sample and self.sample.info else None

    def palette_entries(self) -> Iterable[tuple[str, str, str]]:
        for _id, _key, action, _label, title, help_text in ACTIONS:
            if action == "toggle_call" and not self.backend.demo:
                continue
            yield title, help_text, action

    # -- actions -------------------------------------------------------------------------
    def action_restart(self) -> None:
        metrics = self.sample.server.metrics if self.sample and self.sample.server else None
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
            BudgetDialog(value, current, self.headroom_inputs, why=why, machine=self._machine()),
            self._relaunch_chosen,
        )

    def _relaunch_chosen(self, util: float | None) -> None:
        flags, self._pending_flags = self._pending_flags, {}
        if util is None:
            return
        self._start_action(
            "relaunch",
            lambda progress: self.backend.relaunch(
                gpu_memory_utilization=util, progress=progress, **flags
            ),
        )

    def action_start_stop(self) -> None:
        if self.state in (ServerState.RUNNING, ServerState.STARTING):
            self._start_action("stop", lambda progress: self.backend.stop(progress=progress))
        else:
            self._start_action("start", lambda progress: self.backend.start(progress=progress))

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

    def action_timeline(self) -> None:
        from vramtop.tui.screens.timeline_screen import TimelineScreen

        self.push_screen(TimelineScreen(self.events))

    def action_toggle_details(self) -> None:
        self._banner_details = not self._banner_details
        self._render_banner()

    def on_finding_banner_toggled(self) -> None:
        self.action_toggle_details()

    def action_focus_log(self) -> None:
        self.query_one("#server-log TailLog").focus()

    def action_search_log(self) -> None:
        self._server_log.start_search()

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

    def action_cycle_theme(self) -> None:
        names = self._theme_names
        index = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(index + 1) % len(names)]
        self.notify(f"Theme: {self.theme}", timeout=2)

    def action_help(self) -> None:
        from vramtop.tui.screens.help_screen import HelpScreen

        self.push_screen(HelpScreen(self.help_rows()))

    def help_rows(self) -> list[tuple[str, str, str]]:
        rows = []
        for binding_id, _key, action, _label, _title, help_text in ACTIONS:
            if action == "toggle_call" and not self.backend.demo:
                continue
            rows.append((self.key_of(binding_id), help_text, binding_id))
        return rows

    def key_of(self, binding_id: str) -> str:
        """The key an action is on, as shown: the settings' keymap, else the default (the
        first of several)."""
        keys = self._keys.get(binding_id) or DEFAULT_KEYS[binding_id]
        first = keys.split(",")[0].strip()
        return KEY_DISPLAY.get(first, first)

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

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        # The palette lists the console's own "Quit vramtop"; Textual's "Quit" would say the
        # same twice.
        for command in super().get_system_commands(screen):
            if command.title != "Quit":
                yield command

    def search_themes(self) -> None:
        """The palette's "Theme": vramtop's themes, the same list `t` cycles through."""
        self.push_screen(
            CommandPalette(providers=[ConsoleThemes], placeholder="Search for themes…")
        )

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

    # -- long actions ---------------------------------------------------------------------
    def _start_action(
        self, name: str, call: Callable[[Callable[[str], None]], ActionResult]
    ) -> None:
        if self.busy is not None:
            return
        self.busy = name
        self._say(f"{name}: starting…", news=False)
        self._render_header()
        self.refresh_bindings()
        self._action_worker(name, call)

    @work(thread=True, exclusive=True, exit_on_error=False, group="action")
    def _action_worker(
        self, name: str, call: Callable[[Callable[[str], None]], ActionResult]
    ) -> None:
        def progress(step: str) -> None:
            self.post_message(ActionProgress(name, step))

        try:
            result = call(progress)
        except Exception as error:
            log.exception("%s failed", name)
            result = ActionResult(ok=False, message=f"{name} failed: {error}")
        self.post_message(ActionFinished(name, result))

    def on_action_progress(self, message: ActionProgress) -> None:
        self._say(f"{message.action}: {message.step}…", news=False)
        self._render_header()

    def on_action_finished(self, message: ActionFinished) -> None:
        self.busy = None
        result = message.result
        done = LAUNCHED.get(message.action) if result.ok else None
        # A launch's result ("ready in 3.2 s (pid 5369)") is what the header shows already:
        # the status line says only that it is done.
        self._say(done or result.message)
        if not result.ok:
            # The message names the cause; the server's own lines (a traceback, often) stay in
            # the log panel, where they are highlighted, rather than in a toast over the screen.
            self.notify(
                f"{result.message} · the server log shows its last lines",
                title=message.action,
                severity="error",
                timeout=10,
            )
        self._render_header()
        self.refresh_bindings()
        self.request_tick()


def _remedy_util(findings: list[Finding]) -> tuple[float | None, str | None]:
    for finding in findings:
        util = finding.remedy.gpu_memory_utilization
        if util is not None:
            return util, f"suggested for: {headline(finding.kind)}"
    return None, None


def _log_notice(sample: Sample, start_key: str) -> str | None:
    info = sample.info
    if info and info.state is ServerState.CRASHED:
        return f"vLLM exited: the last lines say why · {start_key} starts it again"
    return None


def run_console(backend: Backend, settings: Settings | None = None) -> int:
    """Open the console on `backend`; returns the process exit code."""
    app = VramtopApp(backend, settings)
    result = app.run()
    if app.farewell:
        print(app.farewell)
    return result if isinstance(result, int) else 0


def _set_aside_start_up() -> None:
    """Collect once, then freeze what survives: the collector stops walking it.

    A full collection walks every object the collector tracks: some 80,000 once Textual,
    Rich, pydantic and the console are loaded. That took about 40 ms of the main thread
    every twenty-odd seconds at 1 Hz, as much as all the drawing in between
    (bench/bench_console.py). Objects made from now on are collected as before; only what
    start-up built, and lives as long as the console, is never looked at again.
    """
    gc.collect()
    gc.freeze()
