"""The console's key table: which action each key does by default, with its words.

Plain data below both the settings (which check a `[keys]` table against these actions) and
the console (whose bindings, footer, palette and help it drives, vramtop/tui/keys.py).
"""

from __future__ import annotations

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
        "relaunch with another budget",
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
    # A replay's own: its recording paused and stepped (hidden, and not in the help, live).
    ("pause", "space", "pause", "Pause", "Pause or play the replay", "replay: pause or play on"),
    (
        "back",
        "left",
        "seek(False)",
        "Back",
        "Seek the replay one sample back",
        "replay: one recorded sample back (pauses)",
    ),
    (
        "forward",
        "right",
        "seek(True)",
        "Forward",
        "Seek the replay one sample forward",
        "replay: one recorded sample forward (pauses)",
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
DEFAULT_KEYS = {binding_id: key for binding_id, key, *_rest in ACTIONS}
