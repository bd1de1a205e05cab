"""When a finding opens and closes, and the margins its remedy leaves (why each value: see the
comment beside it)."""

from __future__ import annotations

from vramtop.core.model import GIB, MIB

COLLAPSE_RATIO = 0.35  # about a third of the normal rate: the field report fell to ~10 %
# The per-request fallback in seconds that also read a prompt: prefill's own dips reach a third
# of that normal, a collapse (the field report's 10x) goes far below.
PREFILL_COLLAPSE_RATIO = 0.2
RECOVERED_RATIO = 0.6  # a mild dip (83 → 52 at 0.85) is not a collapse and counts as normal
# Judged running samples (one a sample; a second with no normal to compare with is not judged,
# one with slowed clocks counts neither way, one that also read a prompt is judged against its
# own normal by PREFILL_COLLAPSE_RATIO): the collapse opens when it holds on 5 of the last 6,
# and closes only when 10 of the last 12 are healthy again, so a noisy collapse does not flap.
WINDOW = 12
OPEN_WINDOW = 6
OPEN_COUNT = 5
# When the card's memory itself shows the squeeze (the desktop holds more than the budget leaves
# it, or the server's memory spilled), the rate has a cause in plain sight: 3 collapsed of the
# last 4 are enough. A long prefill's stall or a lone slow second never comes with that evidence.
CORROBORATED_WINDOW = 4
CORROBORATED_COUNT = 3
CLOSE_COUNT = 10
# A slowdown short of a collapse (vram_slowdown, a warning): the rate under 0.7 of its normal
# while the memory shows the squeeze, on 25 of the last 30 judged seconds (half a minute: a
# prompt's stall or a lone slow stretch does not last that long); it closes once 10 of the last
# 12 judged seconds are back to 0.85 of normal, or 10 of the last 12 running samples no longer
# show the squeeze. The field report's dip at 0.85 (83 → 52, a ratio of 0.63) is one.
SLOWDOWN_RATIO = 0.7
SLOWDOWN_WINDOW = 30
SLOWDOWN_OPEN_COUNT = 25
SLOWDOWN_CLEAR_RATIO = 0.85
SLOWDOWN_CLOSE_WINDOW = 12
SLOWDOWN_CLOSE_COUNT = 10
# Running seconds that contradict a remembered normal (not at it, nothing squeezing the
# server) before it is forgotten and the normal learned again.
RELEARN_SAMPLES = 30
PREFILL_TPS = 100.0  # prompt tokens/s above this: a prefill is making progress, not stuck
KV_LOW = 0.5  # KV usage at or below this cannot explain a slowdown
CARD_FULL = 0.97  # used/total at or above this: the card is nearly full
DESKTOP_GROWTH_BYTES = 512 * MIB  # the non-server share grew by at least this since start
DESKTOP_MARGIN_BYTES = GIB // 2  # what the remedy leaves above the desktop's peak
# A desktop this close to what the budget leaves it squeezes a full card (vram_slowdown): it has
# less room than the margin a suggested budget would leave above its peak.
SLOWDOWN_NEAR_HEADROOM_BYTES = DESKTOP_MARGIN_BYTES
# When the desktop never got past what the server left it, its visible peak is only what it
# was allowed: its real demand was not seen. Allow for the unseen part: a call's demand above
# the share at the server's start, less what was seen; where that share is not known, this,
# sized like the field report's successful change (0.93 → 0.85 gave the desktop ~2.5 GiB back).
UNSEEN_DESKTOP_DEMAND_BYTES = 2 * GIB
KV_HIGH = 0.9
KV_CLEAR = 0.85
PREEMPTION_RECENT_S = 10.0
THROTTLE_WINDOW = 5
THROTTLE_OPEN = 3
# Clock reasons that slow the card. sw_power_cap alone is left out: at full load a card sits
# at its power limit by design, and that is its normal speed, not a slowdown.
SLOWDOWN_REASONS = frozenset({"hw_thermal", "sw_thermal", "hw_slowdown", "hw_power_brake"})
HOT_C = 90  # this hot *and* slower than healthy counts as throttling even without a reason
HOT_SLOW_RATIO = 0.7
UNHEALTHY_SAMPLES = 2  # /health failing this many samples in a row after being healthy
# A server whose every request times out for this long is hung (or stopped), not slow: vLLM
# answers /metrics and /health from its API process even while the engine is busy.
NOT_ANSWERING_S = 10.0
