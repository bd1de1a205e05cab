"""The one place for budget arithmetic: vLLM's rounding, what fits, every warning."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from vramtop.core.budget import (
    CONFIRM,
    DOES_NOT_FIT_NOW,
    GIB,
    MIB,
    NO_EFFECT_ON_CPU,
    NO_KV_BLOCK,
    NOTE,
    START_MARGIN_BYTES,
    budget_bytes,
    budget_warnings,
    change_words,
    desktop_headroom_bytes,
    fit_now,
    largest_util_leaving,
    largest_util_that_fits,
    largest_util_that_fits_logged,
    leaves_no_kv_block,
)
from vramtop.core.desktop_share import (
    CALL_DEMAND_BYTES,
    GROWTH_HORIZON_S,
    DesktopDemand,
    growth_rate,
    suggested_budget,
)
from vramtop.core.diagnosis.server_down import startup_oom_facts, startup_oom_report
from vramtop.core.headroom.calculator import predict
from vramtop.core.headroom.from_startup import gib
from vramtop.core.headroom.terms import Architecture, HeadroomInputs
from vramtop.supervisor.causes import find_cause

TOTAL = gib(31.84)
ARCH = Architecture(full_attention_layers=16, kv_heads=4, head_dim=128)
INPUTS = HeadroomInputs(
    total_bytes=TOTAL,
    architecture=ARCH,
    weights_bytes=gib(18.9),
    non_torch_bytes=gib(0.25),
    activation_bytes=gib(0.8),
    cudagraph_bytes=gib(0.4),
    outside_budget_bytes=gib(0.35),
)


@given(st.integers(0, 40 * GIB), st.integers(1 * GIB, 40 * GIB))
def test_the_largest_budget_that_fits_never_exceeds_the_free_memory(free: int, total: int) -> None:
    util = largest_util_that_fits(free, total)
    if util > 0:
        assert budget_bytes(total, util) + START_MARGIN_BYTES <= free
    if util < 0.99:  # the next step up would not fit
        assert budget_bytes(total, round(util + 0.01, 2)) + START_MARGIN_BYTES > free


@given(st.integers(0, 30 * GIB), st.integers(0, 2 * GIB))
def test_the_largest_budget_leaving_a_headroom_leaves_it(headroom: int, outside: int) -> None:
    util = largest_util_leaving(TOTAL, headroom, outside)
    if util > 0:
        assert desktop_headroom_bytes(TOTAL, util, outside) >= headroom
    if 0 < util < 1:
        assert desktop_headroom_bytes(TOTAL, round(util + 0.01, 2), outside) < headroom


def test_one_answer_for_one_start_failed_line() -> None:
    # The line: the supervisor said 0.92, the finding 0.91. 22.08 / 24.00 is 0.92
    # exactly, which needs all of what was free; 0.91 leaves 0.24 GiB, less than the start
    # margin: 0.90 for both.
    line = (
        "ValueError: Free memory on device cuda:0 (22.08/24.00 GiB) on startup is less than "
        "desired GPU memory utilization (0.95, 22.80 GiB)."
    )
    facts = startup_oom_facts(line)
    assert facts is not None
    remedy = startup_oom_report(line, facts).remedy.budget
    cause = find_cause([line])
    assert cause is not None
    assert remedy == cause.largest_fitting_budget == largest_util_that_fits_logged(22.08, 24.0)
    assert remedy == 0.9


def test_the_last_runs_failure_is_the_cause() -> None:
    first = (
        "ValueError: Free memory on device (10.00/24.00 GiB) on startup is less than desired "
        "GPU memory utilization (0.95, 22.80 GiB)."
    )
    last = first.replace("10.00/", "20.00/")
    cause = find_cause([first, "INFO starting again", last])
    assert cause is not None and cause.largest_fitting_budget == largest_util_that_fits_logged(
        20.0, 24.0
    )


def test_fits_now_says_what_it_needs_and_what_is_free() -> None:
    desktop = gib(3.5)
    fit = fit_now(TOTAL, 0.86, desktop, gib(0.35))
    assert fit.needs_bytes == budget_bytes(TOTAL, 0.86)
    assert fit.free_bytes == TOTAL - desktop - gib(0.35)
    assert fit.fits and not fit.tight
    assert fit.text() == "fits now: yes (needs 27.38 GiB; vLLM would find 27.99 GiB free)"
    # vLLM's own check is requested <= free: 0.11 GiB to spare fits, and the margin is said
    # as what it is rather than as a "no".
    tight = fit_now(TOTAL, 0.86, gib(4.0), gib(0.35))
    assert tight.fits and tight.tight and tight.spare_bytes < START_MARGIN_BYTES
    assert tight.text() == (
        "fits now: yes, 0.11 GiB to spare: a growing call can take that "
        "(needs 27.38 GiB; vLLM would find 27.49 GiB free)"
    )
    # One byte more than free is a refusal, as vLLM's is.
    over = fit_now(TOTAL, 0.86, TOTAL - gib(0.35) - budget_bytes(TOTAL, 0.86) + 1, gib(0.35))
    assert not over.fits
    too_big = fit_now(TOTAL, 0.95, desktop, gib(0.35))
    assert not too_big.fits and too_big.text().startswith("fits now: no (needs 30.25 GiB")


def test_every_warning_comes_from_one_check() -> None:
    small = predict(INPUTS, 0.62)  # the weights alone do not fit
    assert leaves_no_kv_block(small)
    kinds = [w.kind for w in budget_warnings(0.62, total=TOTAL, prediction=small)]
    assert kinds == [NO_KV_BLOCK]
    # A pool smaller than one block: vLLM refuses it too.
    tiny = replace(predict(INPUTS, 0.93), kv_cache_bytes=1, num_blocks=0)
    assert leaves_no_kv_block(tiny)
    ok = predict(INPUTS, 0.9)
    assert not leaves_no_kv_block(ok)
    crowded = budget_warnings(
        0.9, total=TOTAL, prediction=ok, desktop=gib(6), outside_budget_bytes=gib(0.35)
    )
    assert [(w.kind, w.severity) for w in crowded] == [(DOES_NOT_FIT_NOW, CONFIRM)]
    assert budget_warnings(0.8, total=TOTAL, prediction=predict(INPUTS, 0.8), desktop=gib(2)) == []
    cpu = budget_warnings(0.5, total=TOTAL, prediction=small, device_kind="CPU")
    assert [(w.kind, w.severity) for w in cpu] == [(NO_EFFECT_ON_CPU, NOTE)]
    assert "VLLM_CPU_KVCACHE_SPACE" in cpu[0].text


def test_growth_rate_is_the_recent_trend_and_never_negative() -> None:
    rising = [(float(t), gib(2) + t * 50 * MIB) for t in range(30)]
    assert abs(growth_rate(rising) - 50 * MIB) < MIB
    falling = [(float(t), gib(5) - t * 50 * MIB) for t in range(30)]
    assert growth_rate(falling) == 0.0
    assert growth_rate(rising[:2]) == 0.0
    # A call's memory arrives in a few seconds and then holds still: it has levelled off.
    step = [(float(t), gib(1.35) + min(t, 4) * gib(0.75)) for t in range(12)]
    assert growth_rate(step[:4]) > gib(0.5)  # still rising
    assert growth_rate(step) == 0.0  # flat for the last 7 s


def test_the_suggestion_keeps_as_much_pool_as_is_safe() -> None:
    outside = gib(0.35)
    for peak_gib in (2.0, 3.3, 4.65, 6.0):
        peak = gib(peak_gib)
        fits_peak = largest_util_leaving(TOTAL, peak, outside)
        s = suggested_budget(
            TOTAL, DesktopDemand(peak=peak), GIB // 2, outside_budget_bytes=outside
        )
        assert fits_peak - 0.02 <= s.budget <= fits_peak
        assert s.desktop_headroom_bytes == desktop_headroom_bytes(TOTAL, s.budget, outside)
        assert s.desktop_headroom_bytes >= peak + GIB // 2


def test_while_the_desktop_grows_the_suggestion_leaves_room_for_the_growth() -> None:
    outside = gib(0.35)
    growing = DesktopDemand(peak=gib(3), now=gib(3), growth_bytes_per_s=30 * MIB)
    s = suggested_budget(TOTAL, growing, GIB // 2, outside_budget_bytes=outside)
    assert s.growing
    # Where it started is not known: its trend for a while more, never beyond a call's demand.
    assert s.desktop_headroom_bytes >= gib(3) + GROWTH_HORIZON_S * 30 * MIB + GIB // 2
    still = suggested_budget(
        TOTAL, DesktopDemand(peak=gib(3)), GIB // 2, outside_budget_bytes=outside
    )
    assert still.budget > s.budget and not still.growing


def test_a_fast_growing_call_is_allowed_a_calls_demand_not_its_ramp_extrapolated() -> None:
    # The field report's call: ~2.95 GiB within 4 s above an idle 1.35 GiB. Offered 2 s into
    # the ramp (+1.5 GiB, growing at 0.74 GiB/s), the budget is the one that holds once the
    # call has levelled off: within 0.01, where the ramp extrapolated gave 0.64.
    outside, at_start = gib(0.35), gib(1.35)
    ramp = DesktopDemand(
        peak=gib(2.85), now=gib(2.85), growth_bytes_per_s=0.74 * GIB, at_start=at_start
    )
    levelled = DesktopDemand(peak=gib(4.3), now=gib(4.3), at_start=at_start)
    first = suggested_budget(TOTAL, ramp, GIB // 2, outside_budget_bytes=outside)
    after = suggested_budget(TOTAL, levelled, GIB // 2, outside_budget_bytes=outside)
    assert first.growing and not after.growing
    assert abs(first.budget - after.budget) <= 0.01
    assert first.desktop_headroom_bytes >= at_start + CALL_DEMAND_BYTES + GIB // 2


def test_a_share_grown_past_a_calls_demand_is_allowed_its_trend_for_a_while() -> None:
    # A build grows 26 GiB over a minute: past a call's demand, it keeps its trend for
    # GROWTH_HORIZON_S more rather than being taken as a call that has peaked.
    at_start, rate = gib(9), 0.43 * GIB
    build = DesktopDemand(peak=gib(30), growth_bytes_per_s=rate, at_start=at_start)
    assert build.expected_growth == round(rate * GROWTH_HORIZON_S)


def test_the_suggestion_never_exceeds_what_fits_now() -> None:
    # The share now above the peak seen while serving (it grew while the server was down).
    demand = DesktopDemand(peak=gib(2), now=gib(5))
    s = suggested_budget(TOTAL, demand, GIB // 2, outside_budget_bytes=gib(0.35))
    assert fit_now(TOTAL, s.budget, gib(5), gib(0.35)).fits


def test_change_words_say_which_way_it_goes() -> None:
    now, lower = predict(INPUTS, 0.93), predict(INPUTS, 0.89)
    words = change_words(now, lower)
    assert words.startswith("frees 1.27 GiB for the desktop, costs ")
    assert words.endswith(" KV tokens against 0.93")
    assert change_words(lower, now).startswith("takes 1.27 GiB from the desktop, gains ")


def test_a_budget_short_of_the_model_says_by_how_much_on_every_surface() -> None:
    """The relaunch dialog's warning and the what-if screen's table say the shortfall, and
    neither shows a pool below 0."""
    from vramtop.tui.screens.headroom_screen import _table

    now, short = predict(INPUTS, 0.9), predict(INPUTS, 0.3)
    assert short.kv_cache_bytes == 0 and short.kv_shortfall_bytes > 0
    words = f"{short.kv_shortfall_bytes / GIB:.2f} GiB short of the weights"
    [warning] = budget_warnings(0.3, total=TOTAL, prediction=short)
    assert warning.kind == NO_KV_BLOCK and words in warning.text
    table = _table(now, short, INPUTS).plain
    pool_row = next(line for line in table.splitlines() if line.startswith("KV pool GiB"))
    assert pool_row.split()[4] == "0.00"  # now, proposed: 0.00, not a negative pool
    assert f"this budget would not start: it is {words}" in table
