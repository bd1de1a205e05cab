"""What a finding says about a spill: the ladder's rung it makes observed, and the driver
setting that may prevent one."""

from __future__ import annotations

from vramtop.core.findings import Ladder
from vramtop.core.json_types import JsonObject
from vramtop.core.windows.spill import SpillEvidence

SYSMEM_FALLBACK_ADVICE = (
    "NVIDIA driver 546.01 and later can refuse to spill CUDA memory into system memory: "
    'NVIDIA Control Panel → Manage 3D settings → "CUDA - Sysmem Fallback Policy" → '
    '"Prefer No Sysmem Fallback" (set it globally or for the program). A spill then becomes '
    "an out-of-memory error instead of a silent slowdown. Caveat: WSL2 has been reported to "
    "ignore this setting (microsoft/WSL issue 11050), so leaving the desktop headroom with a "
    "lower --gpu-memory-utilization is still the dependable fix."
)

# Words that mark the ladder's spill rung ("… lost VRAM residency and is served from system
# memory …"): when the Windows counters show the spill, that rung is no longer a hypothesis.
_SPILL_RUNG_WORDS = ("residency", "system memory", "spill")


def cite_spill(ladder: Ladder, spill: SpillEvidence | None) -> Ladder:
    """A finding's ladder with the spill cited as observed, when there is one.

    Without evidence it comes back unchanged. With it, the spill sentence joins "observed"
    with its numbers, the hypothesis about residency is dropped, and what is still not
    measured — that the PCIe reads are what slows decoding — moves to "inferred". The
    evidence cites the spill's figures too (`with_spill`).
    """
    if spill is None:
        return ladder
    rise, now = spill.rise_bytes / 1024**3, spill.shared_bytes / 1024**3
    seen = (
        f"amdgpu: vLLM's buffers in GTT (system memory) rose by {rise:.2f} GiB to {now:.2f} "
        f"GiB since t={spill.first_seen_t:.0f} s: part of vLLM's memory was evicted from VRAM"
        if spill.source == "gtt"
        else f"Windows counters: the WSL VM's shared GPU memory (system memory) rose by "
        f"{rise:.2f} GiB to {now:.2f} GiB since t={spill.first_seen_t:.0f} s: part of vLLM's "
        "memory left the card"
    )
    return Ladder(
        observed=(*ladder.observed, seen),
        inferred=(
            *ladder.inferred,
            "decode steps read the spilled memory over PCIe, which explains the slowdown",
        ),
        hypothesis=tuple(
            h for h in ladder.hypothesis if not any(w in h.lower() for w in _SPILL_RUNG_WORDS)
        ),
    )


def with_spill(evidence: JsonObject, spill: SpillEvidence | None) -> JsonObject:
    """A finding's evidence with the spill's figures (a key it has already takes its value)."""
    if spill is None:
        return evidence
    return {**evidence, **spill.as_evidence()}
