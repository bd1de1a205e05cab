"""What the simulated card says it is doing: PCIe traffic, utilisation, residency failures.

The figures NVML gives (`nvmlDeviceGetPcieThroughput`, `nvmlDeviceGetUtilizationRates`) and
the lines WSL2's kernel logs, derived from the ledger's numbers. No I/O, no clock.

Where each figure comes from:
- Decoding from host memory. The ledger's decode model (`ledger.py`) costs each step
  `spilled / SPILL_BYTES_PER_S` on top of its nominal time. A step reads about half of what
  was spilled (`HOST_READ_SHARE`, a modelled guess: the spill is spread over the weights and
  the KV pool in proportion, and a step reads all the weights but only the used part of a
  mostly empty pool), so the link carries `HOST_READ_SHARE × SPILL_BYTES_PER_S` = 12 GiB/s
  while the step waits on it, and RX averaged over the step is that times the share of the
  step spent waiting. For the field report's ~2.5 GiB spill that is ~11.5 GB/s: the issue's
  "PCIe RX 12 GB/s while decoding" (the field report itself did not measure PCIe).
- Otherwise: ~0.3 GB/s RX while decoding from VRAM (the issue's "0.3 before the call": token
  ids, sampling, small copies); 0.02 GB/s idle; TX 0.1 GB/s while decoding, 0.01 idle (a
  modelled guess: results and logits go back to the host, little else).
- GPU utilisation: NVML counts the time a kernel ran, and a decode step's kernels run while
  they wait on PCIe too, so it stays high while decoding, spill or not (the issue's "GPU
  97 %"); idle, the desktop's rendering: 2 %, up to 8 % during a call (a modelled guess).
- Memory-controller utilisation: decoding streams the weights from VRAM; at the nominal 80
  tok/s that keeps the memory busy ~62 % of the time (a modelled guess: ~15 GiB read per token
  is ~1.3 TB/s of the 5090's ~1.8 TB/s, below which NVML's busy share runs). A step slowed by a
  spill reads the same VRAM bytes in a longer step: the share falls by the step's factor.
- Residency failures (WSL2's `dxgkio_make_resident: Ioctl failed: -12`): while a server
  with spilled memory decodes and the card has no room to take it back, about two a
  simulated second (a modelled guess: the driver retries as the kernels touch evicted
  allocations).
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 1e9
HOST_READ_SHARE = 0.5
RX_DECODING = 0.3 * GB
RX_IDLE = 0.02 * GB
TX_DECODING = 0.1 * GB
TX_IDLE = 0.01 * GB
GPU_UTIL_DECODING = 0.97
GPU_UTIL_IDLE = 0.02
GPU_UTIL_CALL = 0.06  # added by a call at its full level (the desktop renders the video)
MEMORY_UTIL_DECODING = 0.62
MEMORY_UTIL_IDLE = 0.01
MEMORY_UTIL_CALL = 0.03
RESIDENCY_FAILURES_PER_S = 2.0


@dataclass(frozen=True)
class ServerLoad:
    """One server's part in what the card does: whether it decodes, what it has spilled,
    and how long its decode step takes against the nominal one."""

    decoding: bool
    spilled_bytes: int
    step_s: float  # the decode step with its spill
    nominal_step_s: float  # the same step from VRAM alone


@dataclass(frozen=True)
class CardActivity:
    pcie_rx_bytes_per_s: int
    pcie_tx_bytes_per_s: int
    gpu_util: float
    memory_util: float


def card_activity(servers: list[ServerLoad], call_level: float) -> CardActivity:
    """The card's PCIe traffic and utilisation with these servers on it."""
    rx, tx = RX_IDLE, TX_IDLE
    gpu = GPU_UTIL_IDLE + GPU_UTIL_CALL * call_level
    memory = MEMORY_UTIL_IDLE + MEMORY_UTIL_CALL * call_level
    for s in servers:
        if not s.decoding:
            continue
        waiting = max(0.0, s.step_s - s.nominal_step_s)
        rx += RX_DECODING - RX_IDLE
        if s.step_s > 0 and waiting > 0:
            # The spilled bytes a step reads, over the step.
            rx += s.spilled_bytes * HOST_READ_SHARE / s.step_s
        tx += TX_DECODING - TX_IDLE
        gpu = max(gpu, GPU_UTIL_DECODING)
        share = s.nominal_step_s / s.step_s if s.step_s > 0 else 1.0
        memory += MEMORY_UTIL_DECODING * share
    return CardActivity(
        pcie_rx_bytes_per_s=round(rx),
        pcie_tx_bytes_per_s=round(tx),
        gpu_util=round(min(1.0, gpu), 3),
        memory_util=round(min(1.0, memory), 3),
    )


def residency_failures(servers: list[ServerLoad], free_bytes: int, dt: float) -> float:
    """WSL2's make-resident failures in `dt` simulated seconds (fractional; the ledger keeps
    the running total): while a decoding server's spill cannot come back onto the card."""
    stuck = any(
        s.decoding and s.spilled_bytes > 0 and free_bytes < s.spilled_bytes for s in servers
    )
    return RESIDENCY_FAILURES_PER_S * dt if stuck else 0.0
