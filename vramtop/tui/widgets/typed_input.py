"""An Input that keeps every key typed into it, in the order typed.

Textual's Input inserts a typed character from its own message queue, but runs backspace and
delete as key *bindings*, once the key has bubbled up to the app. Typed fast (backspaces, then
"0.93", arriving together), the characters went in first and the backspaces, run afterwards,
deleted them: the field ended empty, refusing a value nobody typed. Here the editing keys are
handled where the characters are, in the order they came.
"""

from __future__ import annotations

from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.widgets import Input

# Editing keys handled in the field's own queue, with the action each runs.
IN_ORDER = {
    "backspace": "delete_left",
    "ctrl+h": "delete_left",
    "delete": "delete_right",
    "ctrl+d": "delete_right",
    "ctrl+w": "delete_left_word",
    "ctrl+u": "delete_left_all",
    "super+backspace": "delete_left_all",
    "ctrl+backspace": "delete_right_word",
    "alt+backspace": "delete_right_word",
    "ctrl+k": "delete_right_all",
}


def _not_in_order(binding: BindingType) -> bool:
    keys = binding.key if isinstance(binding, Binding) else binding[0]
    return not any(key.strip() in IN_ORDER for key in keys.split(","))


class TypedInput(Input, inherit_bindings=False):
    # Input's bindings but the editing keys: bound, they would also run when a key reaches
    # the app before the field (typed the moment a dialog opens), deleting on their own.
    BINDINGS: ClassVar[list[BindingType]] = [b for b in Input.BINDINGS if _not_in_order(b)]

    async def _on_key(self, event: events.Key) -> None:
        action = IN_ORDER.get(event.key)
        if action is not None:
            event.stop()
            event.prevent_default()
            await self.run_action(action)
            return
        await super()._on_key(event)
