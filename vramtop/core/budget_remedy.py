"""Budget arithmetic for remedies: what a `--gpu-memory-utilization` leaves the desktop, and
what a smaller one costs the KV pool."""

from __future__ import annotations

from typing import Any

from vramtop.core.headroom import budget_bytes, desktop_headroom_bytes, largest_util_leaving


def headroom_at(total: int, util: float, outside: int) -> int:
    """What the desktop may use beside a server at `util`: total − budget − outside."""
    return int(desktop_headroom_bytes(total, util, outside_budget_bytes=outside))


def largest_util_for_desktop(total: int, desktop_need: int, outside: int) -> float:
    """The largest 2-decimal utilization below 1 that leaves `desktop_need` bytes to the
    desktop; 0.0 when none does."""
    return min(0.99, largest_util_leaving(total, desktop_need, outside))


def kv_cost(
    total: int, util_now: float | None, util_new: float, kv_pool: int | None, kv_tokens: int | None
) -> dict[str, Any]:
    """What a smaller budget costs the KV pool: it shrinks by the budget difference."""
    if util_now is None:
        return {}
    shrink = budget_bytes(total, util_now) - budget_bytes(total, util_new)
    cost: dict[str, Any] = {"budget_change_bytes": -shrink}
    if kv_pool:
        after = max(0, kv_pool - shrink)
        cost.update(kv_pool_bytes=kv_pool, kv_pool_bytes_after=after)
        cost["kv_pool_loss_fraction"] = round(shrink / kv_pool, 3)
        if kv_tokens:
            cost.update(
                kv_cache_tokens=kv_tokens, kv_cache_tokens_after=kv_tokens * after // kv_pool
            )
    return cost
