"""The first offer is one vLLM accepts: on every simulated machine, `b` pressed the moment the
banner first offers a relaunch, then Enter, brings up a server that serves, with one request of
its --max-model-len fitting in its pool (vLLM's startup checks pass), at the budget offered.

Real processes (the simulated GPU, the fake vLLM server that refuses a start as vLLM does, the
simulated agent), through Pilot: the keys a person presses."""

from __future__ import annotations

import re

import pytest

from tests.support.console import FAST, header, running_pid, toggle_call, wait_for
from tests.support.waiting import PROCESS_S
from vramtop.core.budget import suggested_relaunch_flags
from vramtop.machines.demo_backend import demo_backend
from vramtop.tui.app import VramtopApp
from vramtop.tui.screens.budget_dialog import BudgetDialog
from vramtop.tui.widgets.finding_banner import FindingBanner


def serving_rate(app: VramtopApp) -> float:
    rates = app.sample.rates if app.sample else None
    return (rates.generation_tps or 0.0) if rates else 0.0


@pytest.mark.slow
@pytest.mark.usefixtures("sim_world")
@pytest.mark.parametrize(
    ("card", "wsl"), [("5090", False), ("5090", True), ("spark", False), ("r9700", False)]
)
async def test_b_at_the_first_offer_relaunches_into_a_server_that_serves(
    card: str, wsl: bool
) -> None:
    backend, _ = demo_backend(wsl=wsl, card=card)
    app = VramtopApp(backend, FAST)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: running_pid(app) is not None and serving_rate(app) > 1)
        old_pid = running_pid(app)
        await wait_for(pilot, lambda: backend.session.normal_rate() is not None, timeout=60)
        await toggle_call(pilot)  # the card's call (or build) begins
        # The console reads four times a second on the wall clock, and the offer follows the
        # desktop's growth: each offer the banner made is kept, with its words, as it is seen.
        offers: dict[float, int | None] = {}

        def offer_seen() -> bool:
            offered = suggested_relaunch_flags(app.shown.findings)
            if offered is None:
                return False
            util, max_model_len = offered
            words = f"relaunch at {util:.2f}" + (
                f", max-model-len {max_model_len:,}" if max_model_len is not None else ""
            )
            # (The banner and the findings are updated by the same tick: read together.)
            assert words in app.query_one(FindingBanner).text
            offers[round(util, 2)] = max_model_len
            return True

        await wait_for(pilot, offer_seen, 90)
        await pilot.press("b")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, BudgetDialog)
        offer_seen()  # (a tick may have moved the offer between the last look and the key)
        # The dialog opens at the offer the banner made when b was pressed.
        util = float(dialog.value_text)
        assert round(util, 2) in offers, (dialog.value_text, offers)
        max_model_len = offers[round(util, 2)]
        shown = str(dialog.query_one("#budget-prediction").render())
        if max_model_len is not None:  # the dialog names the same ceiling as the banner
            assert f"--max-model-len {max_model_len:,}" in shown
        fit = str(dialog.query_one("#budget-fit").render())
        assert "fits now: yes" in fit, fit
        await pilot.press("enter")  # one Enter: the first offer needs no confirmation
        await wait_for(
            pilot,
            lambda: running_pid(app) not in (None, old_pid) and f"budget {util:.2f}" in header(app),
            timeout=90,
        )

        def scraped() -> bool:
            # The new server's own metrics, not the stale ones a timed-out scrape keeps.
            server = app.sample.server if app.sample else None
            return server is not None and not server.stale and server.metrics is not None

        await wait_for(pilot, scraped)
        server = app.sample.server if app.sample else None
        metrics = server.metrics if server else None
        assert metrics is not None and metrics.cache.gpu_memory_utilization == util
        # vLLM's check: one request of the server's --max-model-len fits in its pool.
        assert metrics.cache.kv_cache_max_concurrency is not None
        assert metrics.cache.kv_cache_max_concurrency >= 1.0
        if max_model_len is not None:
            assert server is not None and server.max_model_len == max_model_len
        log = "\n".join(backend.log_lines())
        assert not re.search(r"To serve at least one request|No available memory", log)
        await wait_for(pilot, lambda: serving_rate(app) > 1, timeout=60)
        # For the person reading the run (-s): what was offered and what came up.
        print(
            f"\n{card}{' wsl' if wsl else ''}: offered {util:.2f} ({max_model_len}); serving, "
            f"{metrics.cache.kv_cache_max_concurrency:.2f}x at {server and server.max_model_len}"
        )
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("s")  # stop vLLM and leave
        await wait_for(pilot, lambda: not app.is_running, timeout=PROCESS_S)
