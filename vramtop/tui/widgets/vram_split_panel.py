"""VRAM split: the fixed-scale bar, the figures, the budget and the headroom it leaves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.content import Content

from vramtop.core.card_activity import activity_line
from vramtop.core.model import GpuReading, MemoryKind, ServerInfo, ServerState, Split, SplitMethod
from vramtop.tui.format import gib
from vramtop.tui.widgets.text_panel import Detail, Facts, Row, TextPanel, Wrapped
from vramtop.tui.widgets.vram_bar import VramBar

if TYPE_CHECKING:
    from vramtop.core.windows.reading import WindowsGpuReading

TOP_PROCESSES = 3
MUTED = "$text-muted"  # the detail rows: what the figures rest on
UNIFIED_TITLE = "unified memory (shared with the system)"


class VramSplitPanel(TextPanel):
    """Rows: the bar, the figures, the budget, what the card says it does (PCIe, GPU and
    memory utilisation, where the driver gives them), the top processes (or how the split
    was made), and on WSL2 what Windows says."""

    _shown_for: tuple[object, ...] | None = None
    # With --demo: the options that bring the simulated machine back as pasted (set by the
    # console on mount: `demo_world.demo_profile_options`).
    demo_options = "--demo"

    def on_mount(self) -> None:
        self.border_title = "VRAM split"

    def show(
        self,
        gpu: GpuReading,
        split: Split | None,
        info: ServerInfo | None,
        windows: WindowsGpuReading | None = None,
        util: float | None = None,
    ) -> None:
        """`util`: the budget the split was made with (the sample's `server_util`); the
        budget line prints that one beside the bytes it gives, never another server's."""
        # What the rows are made of: the same again (the memory moves far less often than
        # once a second, and a GPU that cannot be read stays so) lays out nothing.
        shown_for = (gpu, split, info.state if info else None, windows, util, self.demo_options)
        if shown_for == self._shown_for:
            return
        self._shown_for = shown_for
        rows: list[Row | Detail]
        unified = split is not None and split.memory_kind is MemoryKind.UNIFIED
        # One pool for the CPU and the GPU (DGX Spark): the panel says so where it is read first.
        title = UNIFIED_TITLE if unified else "VRAM split"
        if self.border_title != title:
            # Set only when it changes: setting it repaints the whole panel, border and all.
            self.border_title = title
        if not gpu.available or split is None:
            reason = gpu.error or "no GPU reading yet"
            rows = [
                VramBar(None),
                # Wrapped, not cut: the reason and what to do are the whole point here.
                Wrapped(Content.assemble(("GPU readings unavailable: ", "bold $error"), reason)),
                Wrapped(Content(_what_to_do(gpu.source, self.demo_options))),
                Detail(""),
            ]
        else:
            rows = [
                VramBar(split),
                split_figures(split),
                _budget_line(split, info, util),
            ]
            activity = activity_line(gpu.devices[0])
            if activity is not None:  # nothing where the card gives none of its figures
                rows.append(Content(activity))
            # The rows below wrap rather than end in "…": the panel's words are never cut.
            rows.append(Detail(_detail_row(gpu, split)))
            if split.server_gtt_bytes is not None:
                rows.append(Wrapped(_gtt_line(gpu, split).stylize_before(MUTED)))
        if windows is not None:
            rows.append(_windows_row(windows))
        self.set_rows(rows)


def _windows_row(windows: WindowsGpuReading) -> Row:
    """WSL2: what Windows says — the desktop programs by name, and the WSL VM's memory
    in VRAM (dedicated) and in system memory (shared: a spill)."""
    if windows.panel_text is not None:
        return Wrapped(Content.styled(windows.panel_text, "$text-warning"))
    facts: list[Content] = []
    vm = windows.wsl_vm
    if vm is not None:
        facts.append(
            Content.assemble(
                f"WSL VM {gib(vm.dedicated_bytes)} in VRAM, ",
                (f"{gib(vm.shared_bytes)} in system memory", "bold"),
            )
        )
    top = windows.desktop[:TOP_PROCESSES]
    facts += [Content(f"{p.name} {gib(p.dedicated_bytes)}") for p in top]
    return _labelled("windows: ", facts)


def _labelled(label: str, facts: list[Content]) -> Facts:
    """`facts` after `label`, muted (the label joins the first, so that the row reads as one
    line where it fits)."""
    first = Content.assemble(label, *facts[:1])
    return Facts(tuple(fact.stylize_before(MUTED) for fact in (first, *facts[1:])))


def _gtt_line(gpu: GpuReading, split: Split) -> Content:
    """AMD: how much of vLLM's memory lies in GTT (system memory): VRAM that overflowed."""
    card = gpu.devices[0].gtt_used_bytes
    parts: list[str | tuple[str, str]] = [
        "gtt: ",
        (f"vLLM {gib(split.server_gtt_bytes)} GiB in system memory", "bold"),
    ]
    if card is not None:
        parts.append(f"  (GTT in use: {gib(card)} GiB)")
    return Content.assemble(*parts)


def split_figures(split: Split) -> Content:
    """The split's figures under its bar, keyed by the bar's glyphs (also the fleet's)."""
    return Content.assemble(
        ("█ ", "$vram-server"),
        f"vLLM {gib(split.server_bytes)}  ",
        ("▓ ", "$vram-desktop"),
        f"desktop/other {gib(split.desktop_bytes)}  ",
        ("░ ", "$vram-free"),
        f"free {gib(split.free_bytes)}  ",
        (f"of {gib(split.total_bytes)} GiB", "$text-muted"),
    )


def _budget_line(split: Split, info: ServerInfo | None, util: float | None) -> Content:
    from vramtop.core.budget import budget_bytes  # with a reading: not for the first frame

    if split.budget_bytes is None:
        return Content("budget: not known (no --gpu-memory-utilization seen yet)")
    if util is not None and budget_bytes(split.total_bytes, util) != split.budget_bytes:
        util = None  # made with another budget: print the bytes alone
    label = f"budget {util:.2f} × total = " if util is not None else "budget "
    parts: list[str | tuple[str, str]] = [
        ("▌ ", "$vram-budget"),
        f"{label}{gib(split.budget_bytes)} GiB",
    ]
    state = info.state if info else None
    if state in (ServerState.CRASHED, ServerState.STOPPED):
        parts.append((" · server down", "$text-muted"))
        return Content.assemble(*parts)
    if split.headroom_bytes is not None:
        parts.append(" · leaves the desktop ")
        tight = split.desktop_bytes is not None and split.desktop_bytes > split.headroom_bytes
        parts.append((f"{gib(split.headroom_bytes)} GiB", "bold $error" if tight else "bold"))
        if split.desktop_bytes is not None:
            parts.append(f" (using {gib(split.desktop_bytes)})")
    return Content.assemble(*parts)


def _detail_row(gpu: GpuReading, split: Split) -> Row:
    """The largest processes where the driver names them, else how the split was made."""
    device = gpu.devices[0]
    if split.method is SplitMethod.PER_PROCESS and device.processes:
        top = sorted(device.processes, key=lambda p: p.used_bytes, reverse=True)[:TOP_PROCESSES]
        return _labelled("top: ", [Content(f"{p.name} ({p.pid}) {gib(p.used_bytes)}") for p in top])
    return Wrapped(Content(split.detail).stylize_before(MUTED))


def _what_to_do(source: str, demo_options: str) -> str:
    if source == "sim":
        # The demo's GPU is a process of vramtop's: no driver to check.
        return f"The simulated machine has stopped: quit, then run vramtop {demo_options} again."
    if source == "recording":
        # A replay: the GPU in question is the recorded machine's, at the time.
        return "The recorded machine could not read its GPU then; nothing to check on this one."
    if source in ("amdsmi", "sysfs"):
        return "Check that the amdgpu driver works (vramtop doctor); the rest keeps updating."
    return "Check that the NVIDIA driver works (nvidia-smi); the rest keeps updating."
