"""Quit: leave vLLM running (the default: the agent keeps its model) or stop it.

Asked only where there is a choice: a server vramtop may stop. Watching a URL or a
recording, or with no server up, quitting just quits.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label

from vramtop.core.model import Sample, ServerState

QuitChoice = Literal["leave", "stop"]
# A server in these states is there to be left running, or stopped.
UP = (ServerState.STARTING, ServerState.RUNNING)
# What leads the farewell's stop command: the command after it is pasted whole.
STOP_LEAD = "To stop it: "


class QuitDialog(ModalScreen[QuitChoice | None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Stay"),
        Binding("l", "choose('leave')", "Leave running", show=False),
        Binding("s", "choose('stop')", "Stop vLLM", show=False),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(id="quit-dialog", classes="dialog"):
            yield Label("Quit vramtop. Leave vLLM running for your agent, or stop it?")
            with Horizontal(classes="buttons"):
                yield Button("Leave running (l)", id="leave", variant="primary")
                yield Button("Stop vLLM (s)", id="stop", variant="error")
                yield Button("Stay (esc)", id="stay")

    def on_mount(self) -> None:
        self.query_one("#quit-dialog").border_title = "Quit"
        self.query_one("#leave", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id in ("leave", "stop"):
            self.dismiss("leave" if event.button.id == "leave" else "stop")
        else:
            self.dismiss(None)

    def action_choose(self, choice: QuitChoice) -> None:
        self.dismiss(choice)

    def action_cancel(self) -> None:
        self.dismiss(None)


def left_running(
    sample: Sample | None,
    *,
    demo: bool,
    profile: str | None,
    wsl: bool | None = None,
    front_door: str | None = None,
) -> str | None:
    """What to print once the console has gone and left the server up: its pid, its URL (and
    the front door the agent reaches it through) and a command that stops it as pasted. None
    when no server was up."""
    info = sample.info if sample else None
    if info is None or info.pid is None or info.state not in UP:
        return None
    url = sample.server.url if sample and sample.server else None
    where = f" at {url}" if url else ""
    if front_door is not None:
        where += f", behind the front door {front_door}"
    name = info.profile or profile
    from vramtop.machines.demo_world import demo_profile_options, profile_options

    if demo:
        stop = f"vramtop stop {demo_profile_options(name, wsl=bool(wsl))}"
    else:
        stop = f"vramtop stop {profile_options(name)}" if name else "vramtop stop"
    return f"vLLM is still running (pid {info.pid}){where}. {STOP_LEAD}{stop}"


def wrapped(farewell: str, width: int) -> str:
    """The farewell as printed to a terminal `width` columns wide: wrapped between words
    (the terminal cut them: "fron|t door"), never inside a word, an address or an option,
    and the stop command whole on a line of its own where the line cannot hold it, to be
    pasted as it is."""
    import textwrap

    if len(farewell) <= width:
        return farewell
    said, lead, command = farewell.partition(STOP_LEAD)
    lines = textwrap.wrap(
        f"{said}{lead}".rstrip(), width, break_long_words=False, break_on_hyphens=False
    )
    return "\n".join([*lines, command] if command else lines)
