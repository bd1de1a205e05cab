"""How many examples a property test (Hypothesis) tries: the count it names in the full
command, as CI runs it, and a quarter of it in the fast loop, run after each change, where the
same properties with fewer examples still find what a change breaks at once.

tests/conftest.py says which: VRAMTOP_TEST_EXAMPLES=fast where the run leaves the slow tests
out (`-m "not slow and not e2e"`); a value already set is kept (`full`: every example, in
any run)."""

from __future__ import annotations

import math
import os

ENV = "VRAMTOP_TEST_EXAMPLES"
FAST_SHARE = 0.25
FAST_LEAST = 20


def examples(count: int) -> int:
    """`count`, or in the fast loop a quarter of it (at least FAST_LEAST)."""
    if os.environ.get(ENV) != "fast":
        return count
    return max(FAST_LEAST, math.ceil(count * FAST_SHARE))
