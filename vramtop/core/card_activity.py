"""The card's own figures in words: PCIe traffic and utilisation as the console shows them.

Decoding from host memory is PCIe-bound: a server whose memory was pushed out of VRAM reads
it back over the bus every step, so PCIe RX in the GB/s while it decodes is the card's own
sign of a spill (the simulator models ~12 GB/s against ~0.3 GB/s from VRAM).
"""

from __future__ import annotations

from vramtop.core.model import GpuDevice

GB = 1e9  # PCIe throughput is read in decimal GB/s, as nvidia-smi and link speeds are


def gb_per_s(value: int | float, digits: int = 1) -> str:
    """Bytes/s as "12.1 GB/s"."""
    return f"{value / GB:.{digits}f} GB/s"


def percent(fraction: float) -> str:
    """A fraction (0..1) as "97 %"."""
    return f"{fraction * 100:.0f} %"


def activity_line(device: GpuDevice) -> str | None:
    """`PCIe RX 12.1 GB/s · GPU 97 % · mem 41 %`, with only the figures the card gave;
    None when it gave none (a driver that does not answer, AMD, a recording without them)."""
    parts = []
    if device.pcie_rx_bytes_per_s is not None:
        parts.append(f"PCIe RX {gb_per_s(device.pcie_rx_bytes_per_s)}")
    if device.gpu_util is not None:
        parts.append(f"GPU {percent(device.gpu_util)}")
    if device.memory_util is not None:
        parts.append(f"mem {percent(device.memory_util)}")
    return " · ".join(parts) if parts else None
