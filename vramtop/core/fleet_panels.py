"""What a box's panels show in `vramtop fleet` (Enter on its row), read from its exporter's
page: the card's split as the console's VRAM bar draws it, the KV pool, the rates, and what
the exporter counts. Pure: a `Page` goes in, values come out; None: the page does not say.

The guard's and the console's steps are not among the series `vramtop export` serves, so a
box's steps cannot be shown from its page (`STEPS_NOT_SERVED`); nothing is made up for them.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramtop.core.fleet_rows import Page
from vramtop.core.model import MemoryKind, Split, SplitMethod

STEPS_NOT_SERVED = (
    "{name}'s exporter does not serve its steps (an older vramtop, or it watches a URL: "
    "nothing there starts the server), so none can be shown here. On the box, `vramtop "
    "events` lists them."
)


@dataclass(frozen=True)
class BoxStep:
    """One kind of step (start, restart, relaunch) as the box's exporter serves it: how many
    since the exporter started, by who asked (those not 0), and the latest one (None: none
    in the box's timeline)."""

    kind: str
    counted: tuple[tuple[str, int], ...]
    last_t: float | None = None
    last_asked_by: str | None = None
    last_result: str | None = None
    last_total_s: float | None = None


def steps_of(page: Page) -> list[BoxStep] | None:
    """The box's steps by kind, in the order a server goes through them; None where its
    exporter serves no `vramtop_steps_total`."""
    if "vramtop_steps_total" not in page.samples:
        return None
    counted: dict[str, dict[str, int]] = {}
    for labels, value in _series(page, "vramtop_steps_total"):
        by = counted.setdefault(labels.get("kind", ""), {})
        if value > 0:
            by[labels.get("asked_by", "")] = int(value)
    last = {
        labels.get("kind", ""): (labels, value)
        for labels, value in _series(page, "vramtop_last_step_timestamp_seconds")
    }
    out = []
    for kind in sorted(counted.keys() | last.keys(), key=_step_order):
        step = BoxStep(kind, tuple(sorted(counted.get(kind, {}).items())))
        if kind in last:
            labels, t = last[kind]
            step = BoxStep(
                kind,
                step.counted,
                last_t=t,
                last_asked_by=labels.get("asked_by") or None,
                last_result=labels.get("result") or None,
                last_total_s=page.value("vramtop_last_step_seconds", kind=kind),
            )
        out.append(step)
    return out


def _step_order(kind: str) -> tuple[int, str]:
    order = ("start", "restart", "relaunch")
    return (order.index(kind) if kind in order else len(order), kind)


@dataclass(frozen=True)
class BoxFigures:
    """A box's panels' figures (None: not on its page)."""

    split: Split | None
    kv_pool_bytes: float | None
    kv_pool_tokens: float | None
    kv_usage: float | None
    running: float | None
    waiting: float | None
    generation_tps: float | None
    generation_normal_tps: float | None
    request_tps: float | None
    request_normal_tps: float | None
    max_model_len: float | None
    restarts: float | None
    crashes: float | None
    findings_opened: tuple[tuple[str, float], ...]
    profile: str | None
    model: str | None
    vllm_version: str | None


def figures(page: Page) -> BoxFigures:
    info = page.labels("vramtop_server_info")
    first = info[0] if info else {}
    opened = [
        (labels.get("kind", ""), value)
        for labels, value in _series(page, "vramtop_findings_opened_total")
    ]
    return BoxFigures(
        split=split_of(page),
        kv_pool_bytes=page.value("vramtop_kv_pool_bytes"),
        kv_pool_tokens=page.value("vramtop_kv_pool_tokens"),
        kv_usage=page.value("vramtop_kv_cache_usage_ratio"),
        running=page.value("vramtop_requests_running"),
        waiting=page.value("vramtop_requests_waiting"),
        generation_tps=page.value("vramtop_generation_tokens_per_second"),
        generation_normal_tps=page.value("vramtop_generation_normal_tokens_per_second"),
        request_tps=page.value("vramtop_request_decode_tokens_per_second"),
        request_normal_tps=page.value("vramtop_request_decode_normal_tokens_per_second"),
        max_model_len=page.value("vramtop_max_model_len_tokens"),
        restarts=page.value("vramtop_server_restarts_total"),
        crashes=page.value("vramtop_server_crashes_total"),
        findings_opened=tuple(sorted((kind, value) for kind, value in opened if value > 0)),
        profile=first.get("profile") or None,
        model=first.get("model") or None,
        vllm_version=first.get("vllm_version") or None,
    )


def _series(page: Page, name: str) -> list[tuple[dict[str, str], float]]:
    return [(dict(labels), value) for labels, value in page.samples.get(name, ())]


def split_of(page: Page) -> Split | None:
    """The first card's split as the exporter serves it (None: the card is not read)."""
    gpu = page.labels("vramtop_gpu_info")
    if not gpu:
        return None
    card = gpu[0].get("gpu", "0")
    total = page.value("vramtop_gpu_memory_total_bytes", gpu=card)
    used = page.value("vramtop_gpu_memory_used_bytes", gpu=card)
    if total is None or total <= 0 or used is None:
        return None
    server = page.value("vramtop_server_memory_bytes", gpu=card)
    desktop = page.value("vramtop_desktop_memory_bytes", gpu=card)
    method = next(
        (labels.get("method") for labels in page.labels("vramtop_server_memory_bytes")), None
    )
    budget = page.value("vramtop_budget_bytes", gpu=card)
    headroom = page.value("vramtop_desktop_headroom_bytes", gpu=card)
    unified = gpu[0].get("memory_kind") == MemoryKind.UNIFIED.value
    return Split(
        total_bytes=int(total),
        server_bytes=_whole(server),
        desktop_bytes=_whole(desktop),
        free_bytes=max(0, int(total - used)),
        method=_method(method),
        detail="as the box's exporter serves it",
        budget_bytes=_whole(budget),
        headroom_bytes=_whole(headroom),
        memory_kind=MemoryKind.UNIFIED if unified else MemoryKind.DEDICATED,
    )


def _whole(value: float | None) -> int | None:
    return None if value is None else int(value)


def _method(label: str | None) -> SplitMethod:
    try:
        return SplitMethod(label or SplitMethod.UNKNOWN.value)
    except ValueError:
        return SplitMethod.UNKNOWN
