"""vram_contention: the desktop squeezes vLLM's memory and generation collapses.

What the finding says once the rule in `Diagnoser` has opened it: the collapse in numbers,
why KV pressure, throttling and a long prefill do not explain it, and the budget to relaunch
at (or a restart) so the desktop keeps its peak without starving the KV pool: that remedy,
shared with vram_slowdown and the memory-only rule, is `relaunch.collapse_remedy`.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramtop.core import sample_facts as read
from vramtop.core.diagnosis.normal_rate import INTER_TOKEN_LATENCY, PER_REQUEST, NormalRate
from vramtop.core.diagnosis.squeeze_facts import CollapseFacts

# re-exported: the guard imports them from here
from vramtop.core.diagnosis.suggested_budget import DesktopShare as DesktopShare
from vramtop.core.diagnosis.suggested_budget import (
    collapse_remedy as collapse_remedy,
)
from vramtop.core.diagnosis.thresholds import DESKTOP_GROWTH_BYTES
from vramtop.core.findings import (
    Evidence,
    Ladder,
    Report,
    RuledOut,
    Severity,
)
from vramtop.core.model import GIB, MIB, GpuDevice, MemoryKind, Sample
from vramtop.core.rate_figures import rate_text
from vramtop.core.windows.prose import cite_spill
from vramtop.core.windows.spill import SpillEvidence


@dataclass
class Point:
    """One running sample's rates, judged against the normal rate."""

    t: float
    generation_tps: float  # all running requests together
    per_request_tps: float  # decode speed per request, in `measure`
    prompt_tps: float | None
    running: float
    collapsed: bool
    at_normal: bool  # at (or near) the normal rate: ratio >= RECOVERED_RATIO, or no normal
    measure: str = PER_REQUEST
    ratio: float | None = None  # per_request_tps / the normal for its concurrency (None: none)
    whole: bool = True  # requests ran at both ends of the interval (else only the latency)


@dataclass(frozen=True)
class Squeeze:
    """What the card shows while the desktop squeezes the server."""

    kv: float | None
    fill: float
    growth: int | None


@dataclass(frozen=True)
class Collapse:
    """The collapsed samples that opened the finding, and what the card looked like then."""

    points: list[Point]
    normal_tps: float  # the normal per-request rate the points were compared with
    kv: float | None
    fill: float
    growth: int | None
    normal: NormalRate | None = None


def collapse_report(
    s: Sample,
    device: GpuDevice,
    collapse: Collapse,
    desktop: DesktopShare,
    spill: SpillEvidence | None,
) -> Report:
    """What the finding says: the collapse in numbers, what it rules out, what to do."""
    ruled_out = _ruled_out(device, collapse)
    return Report(
        severity=Severity.CRITICAL,
        summary=_summary(collapse, device),
        evidence=Evidence.of(_evidence(s, device, collapse, desktop, spill)),
        ruled_out=ruled_out,
        ladder=cite_spill(_ladder(device, collapse, ruled_out), spill),
        remedy=collapse_remedy(s, device, desktop),
    )


def _rate(collapse: Collapse) -> float:
    """The mean per-request decode speed of the collapsed seconds."""
    return sum(p.per_request_tps for p in collapse.points) / len(collapse.points)


def _total(collapse: Collapse) -> float:
    return sum(p.generation_tps for p in collapse.points) / len(collapse.points)


def _evidence(
    s: Sample,
    device: GpuDevice,
    collapse: Collapse,
    desktop: DesktopShare,
    spill: SpillEvidence | None,
) -> CollapseFacts:
    rate, base = _rate(collapse), collapse.normal_tps
    running = collapse.points[-1].running
    normal = collapse.normal
    return CollapseFacts(
        generation_tps=round(_total(collapse), 2),
        baseline_generation_tps=round(base * max(1.0, running), 2),
        ratio=round(rate / base, 3) if base else None,
        decode_tps=round(rate, 2),
        normal_decode_tps=round(base, 2),
        decode_measure=collapse.points[-1].measure,
        normal_rate_source=normal.source if normal is not None else None,
        normal_rate_saved_at=normal.saved_at if normal is not None else None,
        requests_running=collapse.points[-1].running,
        kv_cache_usage=collapse.kv,
        used_bytes=device.used_bytes,
        total_bytes=device.total_bytes,
        used_fraction=round(collapse.fill, 4),
        desktop_bytes=read.desktop_bytes(s),
        desktop_bytes_at_start=desktop.at_start,
        desktop_growth_bytes=collapse.growth,
        desktop_peak_bytes=desktop.peak,
        server_bytes=s.split.server_bytes if s.split else None,
        memory_kind=device.memory_kind.value,
        memory_available_bytes=device.free_bytes
        if device.memory_kind is MemoryKind.UNIFIED
        else None,
        budget_bytes=s.split.budget_bytes if s.split else None,
        spill=spill,
    )


# What the card rules out of a slow decode, by name (the session format's `ruled_out` keys).
KV_PRESSURE_RULED_OUT = "kv_pressure"
THROTTLING_RULED_OUT = "gpu_throttling"


def ruled_out_by_memory(device: GpuDevice, kv: float | None) -> dict[str, RuledOut]:
    """What the card rules out of a slow decode: KV pressure (usage far from full) and
    throttling (no clock slowdown reported). A collapse and a slowdown cite both."""
    ruled_out: dict[str, RuledOut] = {}
    if kv is not None:
        ruled_out[KV_PRESSURE_RULED_OUT] = RuledOut(
            f"KV cache usage {kv:.1%} is far from full", {"kv_cache_usage": kv}
        )
    ruled_out[THROTTLING_RULED_OUT] = RuledOut(
        "no thermal or hardware clock slowdown reported"
        + (f" at {device.temperature_c} °C" if device.temperature_c is not None else ""),
        {"temperature_c": device.temperature_c, "throttle": list(device.throttle)},
    )
    return ruled_out


def _ruled_out(device: GpuDevice, collapse: Collapse) -> dict[str, RuledOut]:
    ruled_out = ruled_out_by_memory(device, collapse.kv)
    prompt = [p.prompt_tps for p in collapse.points if p.prompt_tps is not None]
    if prompt:
        mean_prompt = sum(prompt) / len(prompt)
        ruled_out["long_prefill"] = RuledOut(
            f"prompt tokens arrive at {mean_prompt:.0f}/s: no long prefill is running",
            {"prompt_tps": round(mean_prompt, 2)},
        )
    return ruled_out


def _ladder(device: GpuDevice, collapse: Collapse, ruled_out: dict[str, RuledOut]) -> Ladder:
    rate, base, kv, growth = _rate(collapse), collapse.normal_tps, collapse.kv, collapse.growth
    used_mib, total_mib = device.used_bytes / MIB, device.total_bytes / MIB
    unified = device.memory_kind is MemoryKind.UNIFIED
    fill = (
        f"system memory, shared with the GPU, is {collapse.fill:.0%} in use "
        f"({device.free_bytes / GIB:.1f} GiB available of {device.total_bytes / GIB:.1f} GiB)"
        if unified
        else f"the card is {collapse.fill:.0%} full ({used_mib:,.0f} of {total_mib:,.0f} MiB)"
    )
    latency = collapse.points[-1].measure == INTER_TOKEN_LATENCY
    observed = [
        f"tokens/s per request fell to {rate_text(rate, 1)} from a normal {rate_text(base, 1)}"
        f"{_normal_origin(collapse)} with {collapse.points[-1].running:.0f} request(s) running"
        + (" (vLLM's per-token latency)" if latency else ""),
        fill,
    ]
    if growth is not None and growth >= DESKTOP_GROWTH_BYTES:
        observed.append(f"the desktop's share grew by {growth / GIB:.2f} GiB since the start")
    if kv is not None:
        observed.append(f"KV cache usage is {kv:.1%}, which rules out cache saturation")
    observed.append(ruled_out[THROTTLING_RULED_OUT].why)
    if unified:
        return Ladder(
            observed=tuple(observed),
            inferred=("the desktop and vLLM are competing for the memory they share",),
            hypothesis=(
                "the kernel is reclaiming or swapping memory vLLM uses, so decode steps wait",
            ),
        )
    return Ladder(
        observed=tuple(observed),
        inferred=("the desktop and vLLM are competing for physical VRAM",),
        hypothesis=(
            "some of vLLM's memory lost VRAM residency and is served from system memory, "
            "so PCIe traffic slows every decode step",
        ),
    )


def _normal_origin(collapse: Collapse) -> str:
    normal = collapse.normal
    if normal is not None and normal.source == "remembered":
        return " remembered from an earlier run"
    return ""


def _summary(collapse: Collapse, device: GpuDevice) -> str:
    rate, base, kv, fill = _rate(collapse), collapse.normal_tps, collapse.kv, collapse.fill
    where = "system memory" if device.memory_kind is MemoryKind.UNIFIED else "the card"
    if base and kv is not None:
        return collapse_words(rate, base, _normal_origin(collapse), kv, where, fill)
    return (
        f"Generation fell to {rate_text(rate, 1)} tok/s with {where} {fill:.0%} full: "
        "the desktop is squeezing vLLM's memory."
    )


def collapse_words(
    rate: float, base: float, origin: str, kv: float, where: str, fill: float
) -> str:
    """The collapse's summary: its per-request rate against the normal (`origin`: '' or
    ' remembered from an earlier run'), KV usage and how full `where` is. The banner says it
    with the frame's throughput view's figures (`throughput.summary_now`)."""
    return (
        f"Generation fell to {rate_text(rate, 1)} tok/s per request ({rate / base:.0%} of the "
        f"normal {rate_text(base)}{origin}) with KV cache at {kv:.1%} and {where} {fill:.0%} full: "
        "the desktop is squeezing vLLM's memory."
    )
