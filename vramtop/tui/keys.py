"""The console's keys: one table (vramtop/core/keymap.py, below the settings that check a
remapping against it) drives the bindings, the footer, the palette and the help.

A person may move any of them (`[keys]` in the settings); what the console says about a key
(the banner, the status line, the help) names it as the keymap has it (`VramtopApp.key_of`).
"""

from __future__ import annotations

from vramtop.core.keymap import ACTIONS, DEFAULT_KEYS
from vramtop.core.step_report import UNDER_WAY  # an action's word while it runs

__all__ = [
    "ACTIONS",
    "DEFAULT_KEYS",
    "FOOTER_HIDDEN",
    "KEY_DISPLAY",
    "LAUNCHED",
    "QUIT_AT_ONCE",
    "REPLAY_ONLY",
    "UNDER_WAY",
]

# A replay's keys: the console on a live machine neither shows nor offers them.
REPLAY_ONLY = {"pause", "seek"}
# The help's words for q where quitting asks nothing (a replay, a URL watched).
QUIT_AT_ONCE = "quit"
# What the status line says once a launch succeeded (the header has its pid and ready time).
LAUNCHED = {"start": "started", "restart": "restarted", "relaunch": "relaunched"}
KEY_DISPLAY = {"slash": "/", "question_mark": "?", "space": "Space", "left": "←", "right": "→"}
# d (details) is offered by the banner itself, the only time it does anything.
FOOTER_HIDDEN = {"focus_log", "cycle_theme", "search_log", "details"}
