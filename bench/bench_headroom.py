"""How fast the headroom model answers: predictions per second, and the inverse searches.

Baseline in the same run: one bare `math.ceil(total × util)` (the budget alone), so the ratio
says how much the full accounting costs on top of the cheapest possible step.
Run from the repository root: PYTHONPATH=. python -m bench.bench_headroom [--scale 1.0]
(--scale 0.01: a hundredth of the calls, one repeat; a quick smoke run)
"""

from __future__ import annotations

import argparse
import math
import timeit
from collections.abc import Callable

from vramtop.core.headroom.calculator import largest_util_for_headroom, predict, util_for_kv_tokens
from vramtop.core.headroom.from_startup import gib
from vramtop.core.headroom.terms import Architecture, HeadroomInputs

HYBRID = Architecture(
    full_attention_layers=12, kv_heads=2, head_dim=256, recurrent_layers=36,
    recurrent_conv_elements=3 * 8192, recurrent_ssm_elements=32 * 128 * 128,
)  # fmt: skip
INPUTS = HeadroomInputs(total_bytes=gib(31.84), architecture=HYBRID, weights_bytes=gib(18.85))


def per_second(call: Callable[[], object], number: int, scale: float = 1.0) -> float:
    number = max(1, int(number * scale))
    seconds = min(timeit.repeat(call, number=number, repeat=5 if scale >= 1 else 1))
    return number / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0, help="share of the calls to time")
    scale = parser.parse_args().scale
    baseline = per_second(lambda: math.ceil(INPUTS.total_bytes * 0.93), 200_000, scale)
    predictions = per_second(lambda: predict(INPUTS, 0.93), 20_000, scale)
    headroom = per_second(lambda: largest_util_for_headroom(INPUTS, gib(3)), 20_000, scale)
    tokens = per_second(lambda: util_for_kv_tokens(INPUTS, 100_000), 2_000, scale)
    print(f"baseline budget only     {baseline:12,.0f} /s")
    print(f"predict (hybrid)         {predictions:12,.0f} /s  ratio {baseline / predictions:6.1f}x")
    print(f"largest_util_for_headroom{headroom:12,.0f} /s")
    print(f"util_for_kv_tokens       {tokens:12,.0f} /s  ({1e3 / tokens:.3f} ms per answer)")
    assert math.isfinite(predictions)


if __name__ == "__main__":
    main()
