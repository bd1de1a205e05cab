"""What the card itself says about a collapse: PCIe RX while decoding, against the normal
period's, and (WSL2) the kernel's residency failures.

Decoding from host memory is PCIe-bound: a server whose memory lost VRAM residency reads it
back over the bus on every step, so RX in the GB/s while it decodes, against a few tenths
before the call, is the card's own measurement of what the field report could only suppose.
On WSL2 the kernel's `dxgkio_make_resident: Ioctl failed: -12` lines say the same from the
driver's side. Both are additive: a recording without them (every one made before) gives the
same finding as before, and a finding cites them only where they were read.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, replace

from vramtop.core import sample_facts as read
from vramtop.core.card_activity import GB
from vramtop.core.findings import Evidence, Ladder, Report
from vramtop.core.model import Sample

# The normal period: RX of the last this many seconds that decoded at the normal rate while
# nothing squeezed the server (the same seconds that teach the normal rate).
NORMAL_SAMPLES = 60
NORMAL_MIN_SAMPLES = 3
# The collapse: RX of the last seconds with requests running (the collapse's own window).
RECENT_SAMPLES = 6
# RX this far above the normal period's, and at least `HOST_READ_RX`, is decoding from host
# memory (the simulator's 0.3 GB/s against ~12; a real link's idle traffic is far below 1).
HOST_READ_RATIO = 4.0
HOST_READ_RX = 1 * GB
# WSL2's residency failures are counted over this many seconds.
RESIDENCY_WINDOW_S = 60.0
_RESIDENCY_WORDS = ("residency", "pcie")


@dataclass(frozen=True)
class CardEvidence:
    pcie_rx_bytes_per_s: int | None  # while decoding now (the median of the recent seconds)
    normal_pcie_rx_bytes_per_s: int | None  # while decoding at the normal rate, before
    residency_failures: int | None  # WSL2: lines in the last RESIDENCY_WINDOW_S (None: not read)

    @property
    def reads_host_memory(self) -> bool:
        """RX says the server decodes from host memory: far above the normal period's."""
        rx, normal = self.pcie_rx_bytes_per_s, self.normal_pcie_rx_bytes_per_s
        return (
            rx is not None
            and normal is not None
            and rx >= HOST_READ_RX
            and rx >= HOST_READ_RATIO * max(normal, 1)
        )


class CardWatch:
    """Keeps the card's RX of the normal period and of the latest running seconds, and the
    residency failures of the last minute."""

    def __init__(self) -> None:
        self._normal: deque[int] = deque(maxlen=NORMAL_SAMPLES)
        self.new_epoch()

    def new_epoch(self) -> None:
        """A server start: its memory is all on the card again. The normal period's RX
        stays (the same model decodes the same way); the collapse's and the failures go."""
        self._recent: deque[int] = deque(maxlen=RECENT_SAMPLES)
        self._residency: deque[tuple[float, int]] = deque()
        self._residency_read = False

    def track(self, s: Sample, normal: bool) -> None:
        """One sample; `normal`: it decoded at the normal rate while nothing squeezed the
        server. Its RX counts where requests were running when it was read (the card's RX
        is of that moment, a 20 ms window; between an agent's turns it is idle traffic)."""
        device = read.primary(s)
        rx = device.pcie_rx_bytes_per_s if device is not None else None
        m = read.metrics(s)
        running = m is not None and (m.requests_running or 0) > 0
        if running and rx is not None:
            self._recent.append(rx)
            if normal:
                self._normal.append(rx)
        failures = s.gpu.residency_failures
        if failures is not None:
            self._residency_read = True
            if failures > 0:
                self._residency.append((s.t, failures))
        while self._residency and self._residency[0][0] <= s.t - RESIDENCY_WINDOW_S:
            self._residency.popleft()

    def evidence(self) -> CardEvidence | None:
        """What the card said, or None where it said nothing (no RX, no kernel log)."""
        rx = round(statistics.median(self._recent)) if self._recent else None
        normal = (
            round(statistics.median(self._normal))
            if len(self._normal) >= NORMAL_MIN_SAMPLES
            else None
        )
        failures = sum(n for _, n in self._residency) if self._residency_read else None
        if rx is None and not failures:
            return None
        return CardEvidence(rx, normal, failures)


def _gb(value: int) -> str:
    """12 GB/s, 0.3: whole figures from 10 up, one decimal below (the ladder's words)."""
    gb = value / GB
    return f"{gb:.0f}" if gb >= 10 else f"{gb:.1f}"


def cite_card(report: Report, card: CardEvidence | None) -> Report:
    """A vram_contention report with what the card said: the RX rung ("PCIe RX 12 GB/s
    while decoding; 0.3 before the call") and the residency failures joining "observed",
    their figures the evidence; decoding from host memory, once RX shows it, moves from the
    hypothesis to "inferred". Unchanged without card evidence."""
    if card is None:
        return report
    observed = list(report.ladder.observed)
    extra: dict[str, int] = {}
    rx, normal = card.pcie_rx_bytes_per_s, card.normal_pcie_rx_bytes_per_s
    if rx is not None:
        before = f"; {_gb(normal)} before the call" if normal is not None else ""
        observed.append(f"PCIe RX {_gb(rx)} GB/s while decoding{before}")
        extra["pcie_rx_bytes_per_s"] = rx
        if normal is not None:
            extra["normal_pcie_rx_bytes_per_s"] = normal
    if card.residency_failures:
        observed.append(
            f"the kernel logged {card.residency_failures} dxgkio_make_resident failures "
            f"(-12) in the last {RESIDENCY_WINDOW_S:.0f} s: WSL2's driver could not make "
            "allocations resident on the card again"
        )
        extra["residency_failures"] = card.residency_failures
    if not extra:
        return report
    ladder = Ladder(tuple(observed), report.ladder.inferred, report.ladder.hypothesis)
    if card.reads_host_memory or card.residency_failures:
        ladder = _host_memory_inferred(ladder)
    evidence = Evidence({**report.evidence, **extra}, report.evidence.facts)
    return replace(report, ladder=ladder, evidence=evidence)


def _host_memory_inferred(ladder: Ladder) -> Ladder:
    """The residency hypothesis, now measured, moves to "inferred" (once: a spill seen by
    Windows' counters may have moved it already)."""
    inferred = ladder.inferred
    if not any("pcie" in sentence.lower() for sentence in inferred):
        inferred = (
            *inferred,
            "vLLM decodes from host memory: each step reads its spilled memory over PCIe, "
            "which explains the slowdown",
        )
    hypothesis = tuple(
        h for h in ladder.hypothesis if not any(w in h.lower() for w in _RESIDENCY_WORDS)
    )
    return Ladder(ladder.observed, inferred, hypothesis)
