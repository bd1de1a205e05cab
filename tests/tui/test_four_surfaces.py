"""One machine state, four surfaces a person reads: the banner's remedy, the relaunch dialog,
the what-if screen and `vramtop calc` print the same budget, desktop headroom and KV pool."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.console import make_app, settle, text, ticks
from tests.support.fake_backend import FakeBackend
from tests.support.synthetic import Card, build, field_report
from vramtop.cli import main
from vramtop.core.budget import GIB
from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.findings import VRAM_CONTENTION, Finding
from vramtop.core.headroom.live_inputs import live_headroom_inputs
from vramtop.core.headroom.terms import HeadroomInputs
from vramtop.core.model import Sample
from vramtop.tui.screens.budget_dialog import BudgetDialog
from vramtop.tui.screens.headroom_screen import HeadroomScreen
from vramtop.tui.widgets.finding_banner import banner_text
from vramtop.tui.widgets.kv_pool_panel import KvPoolPanel
from vramtop.tui.widgets.vram_split_panel import VramSplitPanel

POOL_BYTES = round(9.26 * GIB)  # what the log prints, to the byte: one state for all four
TOKENS = 120_832


class StateBackend(FakeBackend):
    """Always shows one sample and the real diagnosis of the session that led to it."""

    def __init__(self, sample: Sample, finding: Finding, inputs: HeadroomInputs) -> None:
        super().__init__()
        self._state = sample
        self._finding = finding
        self._inputs = inputs

    def next_sample(self) -> Sample:
        return self._state

    def findings(self) -> list[Finding]:
        return [self._finding]

    def headroom_inputs(self) -> HeadroomInputs | None:
        return self._inputs


def machine_state() -> tuple[Sample, Finding, Diagnoser]:
    """The field report's card at the height of a call: collapsed, the finding open."""
    card = Card(wsl=False, kv_pool_bytes=POOL_BYTES, kv_tokens=TOKENS)
    diagnoser = Diagnoser()
    last: Sample | None = None
    for item in build(card, field_report(call_at=120.0, restart_at=400.0)):
        if isinstance(item, tuple):
            diagnoser.feed_event(*item)
        else:
            diagnoser.feed_sample(item)
            last = item
        if item is not None and not isinstance(item, tuple) and item.t >= 200:
            break
    finding = next(f for f in diagnoser.open_findings() if f.kind == VRAM_CONTENTION)
    assert last is not None
    return last, finding, diagnoser


def figures(words: str, budget: str, headroom: str, pool: str, tokens: str) -> dict[str, str]:
    """The four figures as printed, read with one pattern each."""
    found = {}
    for name, pattern in (
        ("budget", budget), ("headroom", headroom), ("pool", pool), ("tokens", tokens),
    ):  # fmt: skip
        match = re.search(pattern, words)
        assert match, f"{name} not found in: {words}"
        found[name] = match.group(1)
    return found


async def test_banner_dialog_what_if_and_calc_print_the_same_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sample, finding, diagnoser = machine_state()
    inputs = live_headroom_inputs(sample, diagnoser.outside_budget_bytes)
    assert inputs is not None
    outside = inputs.outside_budget_bytes
    assert outside is not None

    banner = banner_text(finding, details=True).plain  # d: the remedy in words
    from_banner = figures(
        banner,
        r"relaunch at (0\.\d\d)",
        r"\((\d+\.\d\d) GiB\)",
        r"KV pool (\d+\.\d\d) GiB",
        r"KV pool \d+\.\d\d GiB, ([\d,]+) tokens",
    )

    app = make_app(StateBackend(sample, finding, inputs))
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("b")
        assert isinstance(app.screen, BudgetDialog)
        dialog_words = f"{app.screen.value_text} " + text(app, "#budget-prediction")
        from_dialog = figures(
            dialog_words,
            r"^(0\.\d\d) ",
            r"desktop headroom (\d+\.\d\d) GiB",
            r"KV pool (\d+\.\d\d) GiB",
            r"· ([\d,]+) tokens",
        )
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("c")
        assert isinstance(app.screen, HeadroomScreen)
        table = text(app, "#headroom-table")

        def proposed(label: str) -> str:
            row = next(line for line in table.splitlines() if line.startswith(label))
            return row[17:].split()[1]  # now, proposed, change

        what_if = {
            "budget": proposed("budget "),
            "headroom": proposed("desktop headroom"),
            "pool": proposed("KV pool GiB"),
            "tokens": proposed("KV tokens"),
        }

    log = tmp_path / "startup.log"
    log.write_text(
        "INFO 11-14 08:59:01 [api_utils.py:286] non-default args: {'max_model_len': 163840, "
        f"'gpu_memory_utilization': {sample.info.budget}}}\n"  # type: ignore[union-attr]
        "INFO 11-14 09:00:08 [gpu_worker.py:310] Available KV cache memory: 9.26 GiB\n"
        f"INFO 11-14 09:00:09 [kv_cache_utils.py:1230] GPU KV cache size: {TOKENS:,} tokens, "
        "Maximum concurrency for 163,840 tokens per request: 0.74x\n"
    )
    total = sample.gpu.devices[0].total_bytes
    code = main(
        ["calc", "--total-gib", repr(total / GIB), "--util", from_banner["budget"],
         "--from-log", str(log), "--outside-budget-gib", repr(outside / GIB), "--json"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    row = json.loads(out)["rows"][0]
    from_calc = {
        "budget": f"{row['util']:.2f}",
        "headroom": f"{row['desktop_headroom_gib']:.2f}",
        "pool": f"{row['kv_cache_gib']:.2f}",
        "tokens": f"{row['kv_cache_tokens']:,}",
    }
    assert from_banner == from_dialog == what_if == from_calc


def test_after_a_startup_out_of_memory_no_restart_is_offered() -> None:
    line = (
        "ValueError: Free memory on device cuda:0 (27.21/31.84 GiB) on startup is less than "
        "desired GPU memory utilization (0.86, 27.38 GiB)."
    )
    diagnoser = Diagnoser()
    diagnoser.feed_event(0.0, "start", {})
    diagnoser.feed_event(5.0, "exit", {"returncode": 1, "last_lines": [line]})
    (finding,) = diagnoser.open_findings()
    words = banner_text(finding).plain
    assert "restart now" not in words
    util = float(re.search(r"relaunch at (0\.\d\d)", words).group(1))  # type: ignore[union-attr]
    # The largest that fits what was free, with the start margin; never the one that failed.
    assert util < 0.86 and round(util * 31.84, 2) <= 27.21 - 0.25


async def test_a_dead_servers_figures_are_marked_stale() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 2)
        assert "stale" not in text(app, KvPoolPanel)
        backend.crash()
        await ticks(pilot, 1)
        assert "303,555 tokens (stale)" in text(app, KvPoolPanel)
        assert "server down" in text(app, VramSplitPanel)


def test_the_budget_line_never_prints_one_budget_beside_anothers_bytes() -> None:
    from vramtop.core.budget import budget_bytes
    from vramtop.core.model import Split, SplitMethod
    from vramtop.tui.widgets.vram_split_panel import _budget_line

    total = round(31.84 * GIB)
    split = Split(
        total_bytes=total, server_bytes=0, desktop_bytes=GIB, free_bytes=total - GIB,
        method=SplitMethod.DERIVED, detail="", budget_bytes=budget_bytes(total, 0.93),
        headroom_bytes=None,
    )  # fmt: skip
    assert "0.93 × total = 29.6 GiB" in _budget_line(split, None, 0.93).plain
    mixed = _budget_line(split, None, 0.86).plain
    assert "0.86" not in mixed and "29.6 GiB" in mixed


class CpuBackend(FakeBackend):
    """A CPU server started without a budget: vLLM reports its default, 0.92."""

    def next_sample(self) -> Sample:
        from dataclasses import replace

        from vramtop.core.model import StartupFacts

        sample = super().next_sample()
        assert sample.server is not None and sample.server.metrics is not None
        metrics = sample.server.metrics
        cache = replace(metrics.cache, gpu_memory_utilization=0.92)
        server = replace(sample.server, metrics=replace(metrics, cache=cache))
        info = replace(sample.info, budget=None) if sample.info else None
        startup = replace(sample.startup or StartupFacts(), device_kind="CPU")
        return replace(sample, server=server, info=info, startup=startup)

    def headroom_inputs(self) -> HeadroomInputs | None:
        return None


async def test_on_a_cpu_server_the_dialog_says_the_budget_does_not_size_the_pool() -> None:
    app = make_app(CpuBackend())
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("b")
        assert isinstance(app.screen, BudgetDialog)
        assert app.screen.value_text == "0.92"  # the budget vLLM reports, not a guess
        words = text(app, "#budget-reason")
        assert "VLLM_CPU_KVCACHE_SPACE" in words and "does not size the KV pool" in words
        assert "fits now" not in text(app, "#budget-fit")
        # No promise that waiting brings a prediction: the budget never sizes this pool.
        prediction = text(app, "#budget-prediction")
        assert "no prediction for a CPU server" in prediction and "not known yet" not in prediction


async def test_a_budget_that_does_not_fit_now_needs_a_second_enter() -> None:
    from textual.widgets import Input

    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("b")
        dialog = app.screen
        assert isinstance(dialog, BudgetDialog)
        assert text(app, "#budget-fit").startswith("fits now: yes (needs ")
        field = dialog.query_one("#budget-value", Input)
        field.value = "0.97"
        await pilot.pause()
        assert text(app, "#budget-fit").startswith("fits now: no (needs 30.89 GiB; vLLM would")
        assert "does not fit now" in text(app, "#budget-reason")
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is dialog and backend.calls == []  # not on the first Enter
        assert "press enter again to relaunch anyway" in text(app, "#budget-reason")
        await pilot.press("enter")
        await settle(pilot)
        assert backend.calls == [("relaunch", 0.97)]


class RelaunchedBackend(FakeBackend):
    """Running at 0.85 after a relaunch that was not saved: the profile still says 0.93."""

    launch_budget = 0.93

    def __init__(self) -> None:
        super().__init__(util=0.85)


async def test_the_what_if_compares_with_now_and_with_the_launch_budget() -> None:
    app = make_app(RelaunchedBackend())
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("c")
        assert isinstance(app.screen, HeadroomScreen)
        await pilot.press("minus")
        table = text(app, "#headroom-table")
        now = next(line for line in table.splitlines() if line.startswith("vs now: "))
        launch = next(line for line in table.splitlines() if line.startswith("vs the profile"))
        assert re.fullmatch(
            r"vs now: frees 0\.32 GiB for the desktop, costs [\d,]+ KV tokens against 0\.85", now
        )
        assert re.fullmatch(
            r"vs the profile's launch budget: frees 2\.8\d GiB for the desktop, "
            r"costs [\d,]+ KV tokens against 0\.93",
            launch,
        )
        await pilot.press("plus", "plus", "plus", "plus", "plus")  # 0.89: more than now
        table = text(app, "#headroom-table")
        assert "vs now: takes 1.27 GiB from the desktop, gains " in table
        assert "vs the profile's launch budget: frees 1.27 GiB for the desktop, costs " in table
