"""The console: one screen of live state, keys that act on the server, never a frozen frame.

Flow: a timer *triggers* a tick; the reader, a thread worker that lives as long as the
console, does the blocking reads through the Backend and posts a `SampleArrived`; the handler
only renders. Actions (restart, relaunch, …) run in their own thread worker and report
progress as messages, so a slow server never blocks a key.

In parts: `keys` (the one table of keys), `showing` (the state, the reader and the
rendering), `acting` (the actions) and here the layout, the themes and which keys make sense.
"""

from __future__ import annotations

import gc
import logging
import sys
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.command import CommandPalette
from textual.containers import Container, Horizontal
from textual.events import Resize
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer

from vramtop import locations
from vramtop.core.model import ServerState
from vramtop.machines.interface import Backend
from vramtop.settings import Settings
from vramtop.tui.acting import ActingConsole
from vramtop.tui.commands import ConsoleCommands, ConsoleThemes
from vramtop.tui.keys import ACTIONS, FOOTER_HIDDEN, KEY_DISPLAY, LAUNCHED
from vramtop.tui.themes import DEFAULT_THEME, VARIABLE_DEFAULTS, load_themes
from vramtop.tui.widgets.console_header import ConsoleHeader
from vramtop.tui.widgets.finding_banner import FindingBanner
from vramtop.tui.widgets.kv_pool_panel import KvPoolPanel
from vramtop.tui.widgets.server_log import ServerLog
from vramtop.tui.widgets.text_panel import TextPanel
from vramtop.tui.widgets.throughput_panel import ThroughputPanel
from vramtop.tui.widgets.vram_split_panel import VramSplitPanel

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


class VramtopApp(ActingConsole):
    """The console: its layout, themes and keys over `ActingConsole`."""

    # An unexpected error, once logged: said in one line on leaving, its traceback in the log.
    crashed: bool = False

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
        self._theme_notices = self._install_themes()

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
        self.screen_change_signal.subscribe(self, self._screen_changed)
        for notice in self._theme_notices:
            self.notify(notice, title="Theme", severity="warning", timeout=8)
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
        self._autostart()

    @work(thread=True, exit_on_error=False, group="autostart")
    def _autostart(self) -> None:
        """The demo (and a profile with no server yet) starts vLLM here, in a worker, so the
        console shows the loading progress instead of waiting before it opens. Whether to
        start is asked here too, off the event loop: a backend built after the first frame
        (machines/deferred_backend.py) is built to know it."""
        if self.backend.autostart:
            self.call_from_thread(
                self._start_action, "start", lambda progress: self.backend.start(progress=progress)
            )

    def on_resize(self, event: Resize) -> None:
        self.set_class(event.size.height < SHORT_DIALOG_HEIGHT, "-short")
        compact = event.size.width < COMPACT_WIDTH or event.size.height < COMPACT_HEIGHT
        # The console's own screen, also when a dialog is on top: resized under the help,
        # it kept its layout for the old size once the help closed.
        main = self.screen_stack[0]
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
        if severity != "information" and isinstance(self.screen, ModalScreen):
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

    def _install_themes(self) -> list[str]:
        """Register vramtop's themes and choose the settings' one; returns what to tell the
        person (a broken theme file, a theme not found)."""
        loaded = load_themes()
        for theme in loaded.themes:
            self.register_theme(theme)
        self._theme_names = sorted(t.name for t in loaded.themes) or [self.theme]
        notices = list(loaded.notices)
        wanted = self.settings.theme
        if wanted in self._theme_names:
            self.theme = wanted
        else:
            if DEFAULT_THEME in self.available_themes:
                self.theme = DEFAULT_THEME
            notices.append(
                f"Theme {wanted!r} was not found or could not be read; using {self.theme}."
            )
        return notices

    # -- keys ----------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "toggle_call":
            return self.backend.demo  # False hides it: outside the demo there is no call
        if action == "toggle_details":
            return bool(self.findings)  # details of the open finding: hidden without one
        if action in ("restart", "relaunch", "start_stop"):
            if not self.backend.can_act:
                return False  # watching only (a URL, a recording): nothing to start or stop
            if action == "start_stop" and self.busy in LAUNCHED:
                return True  # stops the server it is bringing up (a load takes minutes)
            if self.busy is not None:
                return None  # shown dimmed: wait for the running action
            state = self.state
            if action == "restart" and state in (None, ServerState.STOPPED):
                return None
        return True

    def palette_entries(self) -> Iterable[tuple[str, str, str]]:
        for _id, _key, action, _label, title, help_text in ACTIONS:
            if action == "toggle_call" and not self.backend.demo:
                continue
            yield title, help_text, action

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

    async def action_search_log(self) -> None:
        await self._server_log.start_search()

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


def run_console(backend: Backend, settings: Settings | None = None) -> int:
    """Open the console on `backend`; returns the process exit code."""
    app = VramtopApp(backend, settings)
    result = app.run()
    if app.farewell:
        print(app.farewell)
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
    build and the first reading are start-up too.
    """
    gc.collect()
    gc.freeze()
    gc.enable()
