"""Every status-line message an action can show fits at 80 columns beside the server's state
(its pid, budget and times give way to it), and a longer one (a failure's cause) goes on
lines of its own below: a status line is never cut with "…".

The messages are read from the code: each step an action reports (`progress("…")`, an
f-string's values as a long placeholder), each result it ends with, and each thing the
console's runner says; a new one is checked without being listed here."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

import vramtop
from tests.support.console import make_app, ticks
from tests.support.fake_backend import EPOCH, FakeBackend
from tests.support.source_trees import tree_of
from vramtop.core.model import Sample, ServerState
from vramtop.core.vllm.log import Phase
from vramtop.supervisor.actions import LAUNCHING
from vramtop.tui import runner
from vramtop.tui.app import VramtopApp
from vramtop.tui.keys import UNDER_WAY
from vramtop.tui.widgets.console_header import ConsoleHeader

PACKAGE = Path(vramtop.__file__).parent
# An f-string's values, by name: the longest action's name, the longest drain (the profile's
# drain_s is at most 600 s); any other (a count, a key) as two characters.
VALUES = {"action": "relaunch", "name": "relaunch", "drain_s": "600"}
VALUE = "99"


def _words(node: ast.expr, names: dict[str, object]) -> list[str]:
    """The text an argument makes: a literal, an f-string (its values as VALUE, a module
    constant as itself), either side of an `if`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            else:
                inner = value.value if isinstance(value, ast.FormattedValue) else value
                name = getattr(inner, "id", None) or getattr(inner, "attr", "")
                named = names.get(name)
                parts.append(named if isinstance(named, str) else VALUES.get(name, VALUE))
        return ["".join(parts)]
    if isinstance(node, ast.IfExp):
        return _words(node.body, names) + _words(node.orelse, names)
    return []


def _calls(path: Path) -> list[ast.Call]:
    return [n for n in ast.walk(tree_of(path)) if isinstance(n, ast.Call)]


def _called(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


def steps() -> set[str]:
    """What an action reports as it goes: the supervisor's steps, the start's phases."""
    found = {LAUNCHING, *(phase.value for phase in Phase if phase is not Phase.FAILED)}
    for path in sorted((PACKAGE / "supervisor").glob("*.py")):
        for call in _calls(path):
            if _called(call) in ("progress", "report") and call.args:
                found.update(_words(call.args[0], {}))
    return found


def results() -> set[str]:
    """What an action that succeeded ends with (a failure's cause is said whole, below)."""
    found: set[str] = set()
    for path in sorted((PACKAGE / "supervisor").glob("*.py")):
        for call in _calls(path):
            ok = call.args[0] if call.args else None
            if _called(call) == "ActionResult" and isinstance(ok, ast.Constant) and ok.value:
                found.update(_words(call.args[1], {}))
    return found


def said_by_the_runner() -> set[str]:
    names = vars(runner)
    found: set[str] = set()
    for call in _calls(PACKAGE / "tui" / "runner.py"):
        if _called(call) == "say" and call.args:
            found.update(_words(call.args[0], names))
        # An action's first words, given to the runner's start.
        found.update(w for k in call.keywords if k.arg == "words" for w in _words(k.value, names))
    return found


def messages() -> list[str]:
    said = {
        *(f"{action}: {step}…" for action in UNDER_WAY for step in steps()),
        *results(),
        *said_by_the_runner(),
    }
    return sorted(said)


def test_the_messages_are_read_from_the_code() -> None:
    said = messages()
    assert "restart: holding new requests at the front door…" in said
    assert "stopped" in said and f"restart: {runner.DOOR_HOLDS}" in said
    assert len(said) > 60


async def _header_lines(app: VramtopApp, message: str) -> list[str]:
    """The header's lines with `message` on the status line; a line wider than the header
    (which the terminal shows cut, ending "…") fails."""
    app.say(message, news=False)
    app.render_header()
    header = app.screen.query_one(ConsoleHeader)
    width = header.content_region.width
    assert all(line.cell_length <= width for line in header.lines), (message, header.lines)
    return [line.plain for line in header.lines]


def _console(state: ServerState) -> VramtopApp:
    backend = FakeBackend()
    backend.pid = 4_194_302  # the longest pid Linux gives
    if state is ServerState.STARTING:
        backend.state, backend.started_at = state, EPOCH - 754.0  # "12m34s so far"
    return make_app(backend)


async def _shown(app: VramtopApp, state: ServerState, said: list[str]) -> list[list[str]]:
    """The header's server line and what follows it, for each message in `said`."""
    async with app.run_test(size=(80, 24)) as pilot:
        await ticks(pilot, 1)
        if state is ServerState.STARTING:  # a start seen before: "(last start: …)" too
            await ticks(pilot, 1)
        return [(await _header_lines(app, message))[1:] for message in said]


@pytest.mark.parametrize("state", [ServerState.RUNNING, ServerState.STARTING])
async def test_every_action_message_is_shown_whole_at_80_columns(
    state: ServerState,
) -> None:
    said = messages()
    app = _console(state)
    shown = await _shown(app, state, said)
    cut = [
        lines
        for message, lines in zip(said, shown, strict=True)
        if not lines[0].rstrip().endswith(message) and " ".join(lines[1:]) != message
    ]
    assert cut == [], "\n".join(repr(lines) for lines in cut)


async def test_every_action_message_fits_beside_a_running_server_at_80_columns() -> None:
    # Seen: "● running pid 30204 · budget 0.93  restart: holding new requests at the front…"
    said = messages()
    app = _console(ServerState.RUNNING)
    shown = await _shown(app, ServerState.RUNNING, said)
    below = [lines for lines in shown if len(lines) != 1]
    assert below == [], "\n".join(repr(lines) for lines in below)


async def test_a_starts_steps_fit_beside_its_seconds_at_80_columns() -> None:
    said = sorted(
        f"{action}: {step}…"
        for action in ("start", "restart", "relaunch")
        for step in (UNDER_WAY[action], LAUNCHING, *(p.value for p in Phase))
    )
    app = _console(ServerState.STARTING)
    shown = await _shown(app, ServerState.STARTING, said)
    assert all(len(lines) == 1 and "s so far" in lines[0] for lines in shown), shown


async def test_a_longer_message_goes_whole_below_the_state() -> None:
    cause = (
        "relaunch failed: vLLM could not allocate the KV cache: 2.1 GiB free of the 3.4 GiB "
        "it needs at --max-model-len 262,144; the previous flags (0.93) serve again"
    )
    app = make_app(FakeBackend())
    async with app.run_test(size=(80, 24)) as pilot:
        await ticks(pilot, 1)
        lines = await _header_lines(app, cause)
        assert lines[1].startswith("● running pid 4242")
        assert " ".join(line.strip() for line in lines[2:]) == cause
        lines = await _header_lines(app, "restarted")  # short again: two lines
        assert len(lines) == 2 and lines[1].endswith("  restarted")


class R9700(FakeBackend):
    """The R9700 demo's machine: the longest card name, a demo profile of its own."""

    def next_sample(self) -> Sample:
        sample = super().next_sample()
        device = replace(sample.gpu.devices[0], name="AMD Radeon AI PRO R9700")
        info = replace(sample.info, profile="demo-r9700") if sample.info else None
        return replace(sample, gpu=replace(sample.gpu, devices=(device,)), info=info)


async def test_the_call_marker_stays_on_the_machine_line_at_80_columns() -> None:
    # Seen on --card r9700 at 80 columns: "… · native Linux · demo-r9700 …", the call cut.
    backend = R9700(demo=True, wsl=False, profile_name="demo-r9700")
    backend.call_on = True
    app = make_app(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await ticks(pilot, 1)
        header = app.screen.query_one(ConsoleHeader)
        first = header.lines[0]
        assert first.cell_length <= header.content_region.width, first.plain
        assert first.plain.startswith("vramtop demo  AMD Radeon AI PRO R9700 31.8 GiB")
        assert first.plain.rstrip().endswith("● call on")
