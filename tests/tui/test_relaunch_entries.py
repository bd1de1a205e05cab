"""One relaunch, whoever asks: the headroom what-if and its budget dialog, `vramtop relaunch`
and the guard's decision each hand the backend the same `FlagChange` for the same flags, and
that change writes the same command line."""

from __future__ import annotations

from dataclasses import replace

from textual.widgets import Input

from tests.guard.test_guard_policy import collapse, remedy_policy, sample
from tests.support.console import make_app, open_budget_dialog, settle, ticks
from tests.support.fake_backend import FakeBackend
from vramtop.cli import build_parser
from vramtop.commands.relaunch import RelaunchOptions
from vramtop.core.guard.decisions import ACTED
from vramtop.core.remedy import FlagChange, Remedy
from vramtop.tui.screens.headroom_screen import HeadroomScreen

CHANGE = FlagChange(budget=0.85, max_model_len=131_072)
COMMAND = ["vllm", "serve", "m", "--gpu-memory-utilization=0.93", "--max-model-len", "163840"]
RELAUNCHED = ["vllm", "serve", "m", "--gpu-memory-utilization=0.85", "--max-model-len", "131072"]


async def dialog_change() -> FlagChange:
    """c, the what-if's --max-model-len typed and its budget stepped down to 0.85, b, enter."""
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 34)) as pilot:
        await ticks(pilot, 2)
        await pilot.press("c")
        assert isinstance(app.screen, HeadroomScreen)
        app.screen.query_one("#max-model-len", Input).value = "131072"
        await pilot.press(*["minus"] * 8)
        dialog = await open_budget_dialog(pilot)
        assert dialog.value_text == "0.85"
        await pilot.press("enter")
        await settle(pilot)
    assert len(backend.changes) == 1
    return backend.changes[0]


def command_line_change() -> FlagChange:
    args = build_parser().parse_args(["relaunch", "--budget", "0.85", "--max-model-len", "131072"])
    return RelaunchOptions.from_args(args).change


def guard_change() -> FlagChange:
    """The automatic remedy's relaunch for a collapse whose remedy names these flags."""
    remedy = Remedy(action="relaunch", budget=0.85, max_model_len=131_072)
    found = replace(collapse(), remedy=remedy)
    policy = remedy_policy()
    policy.observe(sample(10.0), [found])
    acted = policy.observe(sample(20.0, running=0), [found])
    assert [d.decision for d in acted] == [ACTED]
    action = acted[0].action
    assert action is not None
    return action.flags


async def test_every_entry_relaunches_with_the_same_flags_and_command_line() -> None:
    changes = {
        "dialog": await dialog_change(),
        "command line": command_line_change(),
        "guard": guard_change(),
    }
    assert changes == dict.fromkeys(changes, CHANGE)
    assert {who: c.applied_to(COMMAND) for who, c in changes.items()} == dict.fromkeys(
        changes, RELAUNCHED
    )
    # The one place that names vLLM's flag: the budget written in vLLM's own spelling.
    assert CHANGE.argv_changes() == {
        "--gpu-memory-utilization": "0.85",
        "--max-model-len": "131072",
    }
