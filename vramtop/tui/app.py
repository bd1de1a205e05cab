"""The console: one screen of live state, keys that act on the server, never a frozen frame.

Flow: a timer *triggers* a tick; the reader, a thread worker that lives as long as the
console, does the blocking reads through the Backend and posts a `SampleArrived`; the handler
only renders. Actions (restart, relaunch, …) run in their own thread worker and report
progress as messages, so a slow server never blocks a key.

One App, composed of parts that each keep their own state: `ConsoleState` (state.py: what
is shown, a value replaced on each change), the `Reader` (reader.py: the thread and its
ask/answer counting), the `ActionRunner` (runner.py: what runs, restart arming, quitting) and
the panels, each keeping the history it draws. `keys` is the one table of keys; here are the
layout, the rendering of the state into the panels, the themes and which keys make sense.
"""

from __future__ import annotations

import gc
import logging
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.command import CommandPalette
from textual.containers import Container, Horizontal
from textual.events import Resize
from textual.geometry import Size
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen, Screen
from textual.timer import Timer

from vramtop import locations
from vramtop.core.model import Sample, ServerState
from vramtop.core.server_events import EventName
from vramtop.machines.interface import Backend, ReplayControls
from vramtop.settings import Settings
from vramtop.tui.commands import ConsoleCommands, ConsoleThemes
from vramtop.tui.console_state import ConsoleState
from vramtop.tui.keys import (
    ACTIONS,
    DEFAULT_KEYS,
    FOOTER_HIDDEN,
    KEY_DISPLAY,
    LAUNCHED,
    QUIT_AT_ONCE,
    REPLAY_ONLY,
)
from vramtop.tui.messages import ActionFinished, ActionProgress, SampleArrived, TickFailed
from vramtop.tui.panels import Panels
from vramtop.tui.reader import Reader
from vramtop.tui.runner import ActionRunner
from vramtop.tui.themes import install_themes, with_vram_variables
from vramtop.tui.widgets.console_footer import ConsoleFooter
from vramtop.tui.widgets.console_header import ConsoleHeader
from vramtop.tui.widgets.finding_banner import DEFAULT_KEYS as BANNER_KEYS
from vramtop.tui.widgets.finding_banner import FindingBanner
from vramtop.tui.widgets.kv_pool_panel import KvPoolPanel
from vramtop.tui.widgets.server_log import ServerLog
from vramtop.tui.widgets.text_panel import TextPanel
from vramtop.tui.widgets.throughput_panel import ThroughputPanel
from vramtop.tui.widgets.vram_split_panel import VramSplitPanel

if TYPE_CHECKING:
    from vramtop.tui.telling import ConsoleTelling
    from vramtop.tui.way_back import WayBack, WayBackOffer

# The screens a key opens are imported when it is pressed: the first frame waits for every
# module imported before it (the timeline's table alone is Textual's DataTable).

log = logging.getLogger(__name__)

# Below either, panels lose their sparklines and the log: still every number, no crash.
COMPACT_WIDTH = 70
COMPACT_HEIGHT = 22
# Below this height the dialogs drop their blank rows (app.tcss, `.-short`): at 24 rows the
# what-if's last lines (how to edit, how to close) were cut off.
SHORT_DIALOG_HEIGHT = 30
# Once the console has started, what start-up built (modules, styles, widgets) is set aside
# from the garbage collector (see `_set_aside_start_up`).
SETTLE_S = 1.0
# Below this, the finding banner's details put the evidence ladder on one line.
SHORT_HEIGHT = 36
# The status line while a finding's details take the arrow keys.
DETAILS_SCROLL = "↑ ↓ PgUp PgDn scroll the finding's details"


class VramtopApp(App[int]):
    """The console: what it shows (`shown`), its reader, its actions, its layout and keys."""

    # An unexpected error, once logged: said in one line on leaving, its traceback in the log.
    crashed: bool = False
    _panels: Panels  # found on mount

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
        self.shown = ConsoleState()  # replaced, never mutated, on the event loop
        self.actions = ActionRunner(self, self)  # the console, and Textual's calls
        self.reader = Reader(backend, self.post_message, clock, quiet=lambda: self.actions.quitting)
        self._ticker: Timer | None = None  # the timer that asks for reads
        self._theme_names: list[str] = []
        self._keys: dict[str, str] = {}  # binding id -> key(s), as remapped in the settings
        # Failure notices told while a dialog is open, shown once it closes (`notify`).
        self._held_notices: list[Callable[[], None]] = []
        self._telling_parts: ConsoleTelling | None = None  # made at the first reading
        self._door_told_t: float | None = None  # the latest `door_restarted` said, by its t
        # The way back to the launch budget after a call (way_back.py), while it is offered.
        self._way_back: WayBack | None = None  # made at the first reading
        self.way_back_offer: WayBackOffer | None = None

    def _handle_exception(self, error: Exception) -> None:
        # Textual's own ending of the app on an unhandled error, with the traceback written to
        # vramtop's log first (Textual would print it over the terminal on leaving).
        log.error("the console stopped on an unexpected error", exc_info=error)
        self.crashed = True
        super()._handle_exception(error)

    def _print_error_renderables(self) -> None:
        if not self.crashed:
            super()._print_error_renderables()
            return
        self._exit_renderables.clear()  # the traceback is in the log: one line instead
        print(
            "vramtop: the console stopped on an unexpected error; its traceback is in "
            f"{locations.own_log_file()}",
            file=sys.stderr,
        )

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

    def on_load(self) -> None:
        # Chosen before the first style sheet is parsed: a theme set once the console runs
        # has every style sheet parsed again for its colours (twice, the first frame waiting).
        self._theme_names, self._theme_notices = install_themes(self, self.settings.theme)

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
            yield ConsoleFooter()

    def on_mount(self) -> None:
        self._panels = Panels(self)
        self.screen_change_signal.subscribe(self, self._screen_changed)
        for notice in self._theme_notices:
            self.notify(notice, title="Theme", severity="warning", timeout=8)
        if self.settings.keys:
            self._keys = dict(self.settings.keys)
            self.set_keymap(self._keys)
        self.render_header()
        self.reader.start(self)
        self._ticker = self.set_interval(self.settings.interval_s, self.reader.request_tick)
        # The first frame comes first: a read (or a start) begun now runs in its thread while
        # the layout is drawn, and the person waits for both.
        self.call_after_refresh(self._after_first_frame)
        self.set_timer(SETTLE_S, _set_aside_start_up)

    def on_unmount(self) -> None:
        self.reader.close()  # it ends now, not at its next look
        if self._telling_parts is not None:
            self._telling_parts.close()  # the profile's actor lock goes

    def _after_first_frame(self) -> None:
        self.reader.request_tick()
        # Crash settling and automatic restarts on a thread of their own, every second: a
        # tick only reads, so it never waits on them (nor on a stop under way).
        self.backend.run_housekeeping()
        self._autostart()

    @work(thread=True, exit_on_error=False, group="autostart")
    def _autostart(self) -> None:
        """The demo (and a profile with no server yet) starts vLLM here, in a worker, so the
        console shows the loading progress instead of waiting before it opens. Whether to
        start is asked here too, off the event loop: a backend built after the first frame
        (machines/deferred_backend.py) is built to know it."""
        if self.backend.autostart:
            self.call_from_thread(
                self.actions.start, "start", lambda progress: self.backend.start(progress=progress)
            )

    def on_resize(self, event: Resize) -> None:
        self.set_class(event.size.height < SHORT_DIALOG_HEIGHT, "-short")
        self._lay_out(event.size)

    def _lay_out(self, size: Size) -> None:
        """Compact panels on a small terminal. On a short one the banner's details, once
        opened, take the rows of the KV and throughput panels until `d` closes them: they
        wrap, every word of the finding on screen (the VRAM panel stays, compact)."""
        if not self.screen_stack:
            return
        details = self.shown.banner_details and bool(self.shown.findings)
        details_room = details and size.height < SHORT_HEIGHT
        # An open finding on a short terminal: the banner's rows come from the panels'
        # history, or the log and the footer went below the screen (80x24).
        banner_room = bool(self.shown.findings) and size.height < SHORT_HEIGHT
        compact = size.width < COMPACT_WIDTH or size.height < COMPACT_HEIGHT or banner_room
        # The console's own screen, also when a dialog is on top: resized under the help,
        # it kept its layout for the old size once the help closed.
        main = self.screen_stack[0]
        main.set_class(details_room, "-details")
        main.set_class(banner_room and not details_room, "-banner")
        if compact != main.has_class("-compact"):
            main.set_class(compact, "-compact")
            for panel in main.query(TextPanel):
                panel.redraw()

    # -- notices -------------------------------------------------------------------------
    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """A toast; a failure's (a warning or an error) raised while a dialog is open is held
        until the dialog closes, then shown for its whole time.

        Toasts are hidden under a dialog (app.tcss), and Textual drops a notification whose
        time runs out: a relaunch that failed while the what-if was being read was never
        told in a toast. Mere news ("Theme: …") is not held: it is stale by then."""
        show = partial(
            super().notify, message, title=title, severity=severity, timeout=timeout, markup=markup
        )
        stack = self.screen_stack  # (empty once the console has taken its screens down)
        if severity != "information" and stack and isinstance(stack[-1], ModalScreen):
            self._held_notices.append(show)
        else:
            show()

    def _screen_changed(self, screen: Screen[Any]) -> None:
        if isinstance(screen, ModalScreen) or not self._held_notices:
            return  # (a dialog opened from a dialog: the console is not back yet)
        held, self._held_notices = self._held_notices, []
        for show in held:
            show()

    def get_css_variables(self) -> dict[str, str]:
        # A theme without vramtop's own variables still gets a readable VRAM bar.
        return with_vram_variables(super().get_css_variables())

    @property
    def theme_names(self) -> tuple[str, ...]:
        """vramtop's themes, in the order `t` cycles through them (the palette lists these)."""
        return tuple(self._theme_names)

    # -- keys ----------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.actions.quitting:
            # The quit question answered: a key typed after it (ahead of the dialog closing)
            # does nothing, rather than open a screen on a console taking its screens down.
            return False
        if action == "toggle_call":
            return self.backend.demo  # False hides it: outside the demo there is no call
        if action in REPLAY_ONLY:
            return self.backend.recorded  # a recording's own keys
        if action == "toggle_details":
            return bool(self.shown.findings)  # details of the open finding: hidden without one
        if action in ("restart", "relaunch", "start_stop"):
            if not self.backend.can_act:
                return False  # watching only (a URL, a recording): nothing to start or stop
            if action == "start_stop" and self.actions.busy in LAUNCHED:
                return True  # stops the server it is bringing up (a load takes minutes)
            if self.actions.busy is not None:
                return None  # shown dimmed: wait for the running action
            # (r on a stopped server starts it, and says so: never a key that does nothing.)
        return True

    def palette_entries(self) -> Iterable[tuple[str, str, str]]:
        for _id, _key, action, _label, title, help_text in ACTIONS:
            if self._offered(action):
                yield title, help_text, action

    def _offered(self, action: str) -> bool:
        """Whether the key does anything in this console (the help and the palette list
        only those): the call only in the demo, a replay's keys only in a replay, no action
        on the server where nothing can act."""
        name = action.split("(")[0]
        if name in ("toggle_call", "restart", "relaunch", "start_stop", *REPLAY_ONLY):
            return self.check_action(name, ()) is not False
        return True  # (d is listed also while no finding is open to show)

    def action_timeline(self) -> None:
        from vramtop.tui.screens.timeline_screen import TimelineScreen

        telling = self._telling()
        actor = telling.actor()  # a guard, while it acts for the profile
        self.push_screen(
            TimelineScreen(
                list(self.shown.events),
                actor=actor or "",
                lasting=partial(telling.lasting, actor),
            )
        )

    def action_toggle_details(self) -> None:
        self.shown = replace(self.shown, banner_details=not self.shown.banner_details)
        self._render_banner()
        self._lay_out(self.size)
        self.call_after_refresh(self._details_room)

    def _details_room(self) -> None:
        """Details longer than the banner's room scroll: the banner takes the arrow keys
        while they are open, and the status line says so; closed, it gives them back."""
        banner = self._panels.banner
        if self.shown.banner_details and self.shown.findings and banner.max_scroll_y > 0:
            banner.can_focus = True
            banner.focus()
            self.say(DETAILS_SCROLL, news=False)
        elif banner.can_focus:
            banner.can_focus = False
            if banner.has_focus:
                self.screen.set_focus(None)
            if self.shown.activity == DETAILS_SCROLL:  # not what was said since (a result)
                self.say(None)
        self.render_header()

    def on_finding_banner_toggled(self) -> None:
        self.action_toggle_details()

    def action_focus_log(self) -> None:
        self.query_one("#server-log TailLog").focus()

    async def action_search_log(self) -> None:
        await self._panels.server_log.start_search()

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
            if not self._offered(action):
                continue
            if action == "quit_console" and not self.backend.can_act:
                help_text = QUIT_AT_ONCE  # nothing of ours runs: q asks nothing
            rows.append((self.key_of(binding_id), help_text, binding_id))
        return rows

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

    # -- the actions (ActionRunner) ------------------------------------------------------
    def action_restart(self) -> None:
        self.actions.restart()

    def action_relaunch(self, suggested: float | None = None) -> None:
        self.actions.relaunch(suggested)

    def action_start_stop(self) -> None:
        self.actions.start_stop()

    def action_headroom(self) -> None:
        self.actions.headroom()

    def action_toggle_call(self) -> None:
        self.actions.toggle_call()

    # -- a replay's keys -----------------------------------------------------------------
    def action_pause(self) -> None:
        backend = self.backend
        if isinstance(backend, ReplayControls):
            paused = backend.toggle_pause()
            self._replay_moved(f"paused · {self.key_of('pause')} plays on" if paused else None)

    def action_seek(self, forward: bool) -> None:
        backend = self.backend
        if isinstance(backend, ReplayControls):
            moved = backend.seek(forward)
            where = "forward" if forward else "back"
            self._replay_moved(
                f"paused · one sample {where}" if moved else f"paused · nothing further {where}"
            )

    def _replay_moved(self, words: str | None) -> None:
        """The replay paused, played on or moved one sample: the frame it stands at, and the clock
        going again where it had stopped at the end of the file."""
        if self.shown.ended and not self.backend.finished:
            self.shown = replace(self.shown, ended=False)
            self._ticker = self.set_interval(self.settings.interval_s, self.reader.request_tick)
        self.say(words, news=False)
        self.request_tick()
        self.render_header()

    def action_quit_console(self) -> None:
        self.actions.quit_console()

    async def action_quit(self) -> None:
        """Textual's own quit (Ctrl+Q, and "Quit" in the palette): the same question as q,
        never an exit that leaves the server (or the simulated machine) unannounced."""
        self.actions.quit_console()

    def on_action_progress(self, message: ActionProgress) -> None:
        if not self.closed:
            self.actions.progress(message)

    def on_action_finished(self, message: ActionFinished) -> None:
        if not self.closed:
            self.actions.finished(message)

    # -- reading (Reader) ----------------------------------------------------------------
    def request_tick(self) -> int:
        """Ask the reader for a read (returns the ask's number). Asks made while a read runs
        become one read after it: a hanging source never piles reads up."""
        return self.reader.request_tick()

    @property
    def reads_pending(self) -> bool:
        """A read was asked for and its sample has not been shown yet."""
        return self.reader.reads_pending

    @property
    def closed(self) -> bool:
        """The console's screens are gone (it is closing): a read posted before and handled
        now has nothing left to be shown on."""
        return not self.screen_stack

    def on_tick_failed(self, message: TickFailed) -> None:
        self.reader.answered(message.answers)
        if self.closed:
            return
        if self.actions.quitting:
            return  # the status line says what the quit is doing until it is done
        self.actions.read_failed(message.answers)  # an action's outcome waits no longer
        # After the outcome, not over it: both are told.
        failed = f"reading failed ({message.reason}); details in {locations.own_log_file().name}"
        self.say(failed, after=True)
        self._panels.server_log.say_unread(message.reason)
        self.render_header()
        self.refresh_bindings()  # a backend that could not be built offers no action

    def on_sample_arrived(self, message: SampleArrived) -> None:
        self.reader.answered(message.answers)
        if self.closed:
            return  # seen on a busy machine: a frame handled after quitting
        self._panels.server_log.say_unread(None)
        frame = message.frame
        if not self.actions.drawn(message.answers):
            # Taken before an action's end: its news is told, its state never drawn after.
            self._tell_news(message)
            return
        previous_state = self.shown.server_state
        self.shown = self.shown.arrived(frame, message.normal_origin)
        self._tell_news(message)
        self._offer_way_back()
        if self.backend.finished and not self.shown.ended:
            self._end_of_recording()
        self._render(frame.sample, list(frame.log_lines), log_kept=message.log_kept)
        if self.shown.server_state != previous_state:
            self.refresh_bindings()

    def _tell_news(self, message: SampleArrived) -> None:
        """What a frame's events tell the person beyond the panels: a recording that failed, a
        front door started again. (Where a notice to the terminal, or a guard's events, would
        be told.)"""
        failed = [e for e in message.frame.events if e.name == EventName.RECORDING_FAILED]
        if failed and not self.shown.recording_failed_said:
            # The recording ended (a full disk); the live view goes on, and says so.
            self.shown = replace(self.shown, recording_failed_said=True)
            error = failed[-1].detail.get("error")
            self.say(f"recording failed: {error} · the live view goes on", news=False)
        # Every frame carries the session's events: each restart is said once, when it arrives.
        told = self._door_told_t
        doors = [
            e
            for e in message.frame.events
            if e.name == EventName.DOOR_RESTARTED and (told is None or e.t > told)
        ]
        if doors:
            self._door_told_t = doors[-1].t
            detail = doors[-1].detail
            words = detail.get("message") or "the front door had died; it was started again"
            self.say(f"{words} ({detail.get('front_door')})", after=True)
        self._telling().findings_changed(message.opened, message.closed)
        for words in self._telling().take_said():  # a guard took over for the profile, or left
            self.say(words, after=True)

    def _offer_way_back(self) -> None:
        """Once a call is over and the server still runs below the profile's launch budget,
        the status line offers the way back (b); the offer goes when it no longer holds."""
        from vramtop.tui.way_back import WayBack

        sample, backend = self.shown.sample, self.backend
        launch = backend.profile_launch  # None: no profile, the adaptive guard's settle time
        if self._way_back is None:
            self._way_back = WayBack() if launch is None else WayBack(launch.settle_s)
        offer = None
        if sample is not None and backend.can_act and self.actions.busy is None:
            offer = self._way_back.offer(
                sample,
                launch.flags if launch is not None else None,
                self.shown.headroom_inputs,
                guard_adaptive=self.shown.frame.adaptive is not None,
            )
        was, self.way_back_offer = self.way_back_offer, offer
        key = self.key_of("relaunch")
        said = self.shown.activity
        if offer is not None and said != offer.words(key):
            # Said when it is new, after a result being told (never over it, before it could
            # be read), and again on a status line left empty while it still holds.
            news = self.shown.activity_until is not None
            if said is None or (offer != was and not news):
                self.say(offer.words(key), news=False)
        elif offer is None and was is not None and said == was.words(key):
            self.say(None)

    def _telling(self) -> ConsoleTelling:
        """The terminal's notifications and the lasting timeline (telling.py), made once a
        reading is shown: the first frame waits for none of the findings' modules."""
        if self._telling_parts is None:
            from vramtop.tui.telling import ConsoleTelling

            self._telling_parts = ConsoleTelling(self.backend, self.write_to_terminal)
        return self._telling_parts

    def write_to_terminal(self, text: str) -> None:
        """Escape sequences for the terminal itself, through Textual's driver (its one writer
        while the console runs); nothing where there is no driver (not running)."""
        driver = self._driver
        if driver is not None:
            driver.write(text)

    def _end_of_recording(self) -> None:
        """A replay reached the end of its file: the clock stops and the last frame stays."""
        self.shown = replace(self.shown, ended=True)
        if self._ticker is not None:
            self._ticker.stop()
        # (The header's first line says when it ended.)
        self.say(f"the clock stopped · {self.key_of('quit')} quits", news=False)

    def on_server_log_kept_lines_wanted(self) -> None:
        self.reader.want_kept_lines()

    # -- showing (ConsoleState into the panels) ------------------------------------------
    def _render(self, sample: Sample, log_lines: list[str], *, log_kept: bool = False) -> None:
        """Every panel from `sample`; `log_lines`: all the backend keeps when `log_kept`."""
        self.render_header()
        self._render_banner()
        start_key = self.key_of("start_stop")
        if self.backend.demo:
            # Read each frame: a backend built after the first one names its profile then.
            from vramtop.machines.demo_world import demo_profile_options

            self._panels.vram.demo_options = demo_profile_options(
                self.backend.profile_name, wsl=bool(self.backend.wsl)
            )
        self._panels.draw(self.shown, sample, log_lines, log_kept=log_kept, start_key=start_key)

    def _render_banner(self) -> None:
        keys = {name: self.key_of(name) for name in BANNER_KEYS}
        short = self.size.height < SHORT_HEIGHT
        if self._panels.draw_banner(
            self.shown, short=short, can_act=self.backend.can_act, keys=keys
        ):
            self.refresh_bindings()  # d (details) is offered while a finding is open
            self._lay_out(self.size)  # its rows, on a short terminal
            # Details open when a finding closes: the arrows and the status line's word for
            # them go back to the log (and come back with the next finding's details).
            self.call_after_refresh(self._details_room)

    def now(self) -> float:
        """The console's clock (a test's own)."""
        return self._clock()

    def say(self, text: str | None, *, news: bool = True, after: bool = False) -> None:
        """Set the status line; `news` (a result) fades after a while, progress stays;
        `after`: said after the result it leads with while that is news, not over it."""
        self.shown = self.shown.said(text, self._clock(), news=news, after=after)

    def render_header(self) -> None:
        until = self.shown.activity_until
        if until is not None and self.actions.busy is None and self._clock() >= until:
            self.say(None)
        self.actions.count_seconds()
        self._panels.draw_header(self.shown, self._clock(), self.backend, self.actions.acting)

    # -- what others read of the console -------------------------------------------------
    @property
    def sample(self) -> Sample | None:
        """The sample shown (None until the first)."""
        return self.shown.sample

    @property
    def state(self) -> ServerState | None:
        return self.shown.server_state

    @property
    def busy(self) -> str | None:
        """The action running now, if any."""
        return self.actions.busy

    @property
    def farewell(self) -> str | None:
        """Printed once the console has gone: where the server left running is."""
        return self.actions.farewell

    def key_of(self, binding_id: str) -> str:
        """The key an action is on, as shown: the settings' keymap, else the default (the
        first of several)."""
        keys = self._keys.get(binding_id) or DEFAULT_KEYS[binding_id]
        first = keys.split(",")[0].strip()
        return KEY_DISPLAY.get(first, first)


def run_console(backend: Backend, settings: Settings | None = None) -> int:
    """Open the console on `backend`; returns the process exit code."""
    app = VramtopApp(backend, settings)
    result = app.run()
    if app.farewell:
        import shutil

        from vramtop.tui.screens.quit_dialog import wrapped

        print(wrapped(app.farewell, shutil.get_terminal_size().columns))
    if app.crashed or (app.return_code or 0) != 0:
        return 1  # ExitCode.ERROR: an unexpected error, its traceback in the own log
    return result if isinstance(result, int) else 0


def _set_aside_start_up() -> None:
    """Collect once, then freeze what survives: the collector stops walking it.

    A full collection walks every object the collector tracks: some 80,000 once Textual,
    Rich, pydantic and the console are loaded. That took about 40 ms of the main thread
    every twenty-odd seconds at 1 Hz, as much as all the drawing in between
    (bench/bench_console.py). Objects made from now on are collected as before; only what
    start-up built, and lives as long as the console, is never looked at again.

    Until now the collector was held off (vramtop/entry.py): the first frame, the backend's
    build and the first reading are start-up too. A console opened where the collector runs
    (a test's process, a program that opens it) leaves it as it found it: it would freeze
    that process's objects too, and walk all of them each time a console opens.
    """
    if gc.isenabled():
        return
    gc.collect()
    gc.freeze()
    gc.enable()
