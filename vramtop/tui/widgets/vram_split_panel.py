"""VRAM split: the fixed-scale bar, the figures, the budget and the headroom it leaves."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content

from vramtop.core.model import GpuReading, ServerInfo, Split, SplitMethod
from vramtop.core.windows import WindowsGpuReading
from vramtop.tui.format import gib
from vramtop.tui.widgets.line import Line
from vramtop.tui.widgets.vram_bar import VramBar

TOP_PROCESSES = 3


class VramSplitPanel(Vertical):
    DEFAULT_CSS = """
    VramSplitPanel { height: auto; }
    VramSplitPanel > #vram-detail { text-wrap: nowrap; text-overflow: ellipsis; }
    VramSplitPanel > #vram-windows { text-wrap: nowrap; text-overflow: ellipsis; display: none; }
    VramSplitPanel > #vram-windows.-shown { display: block; }
    """

    def compose(self) -> ComposeResult:
        yield VramBar()
        yield Line(id="vram-figures")
        yield Line(id="vram-budget")
        yield Line(id="vram-detail", classes="detail")
        yield Line(id="vram-windows", classes="detail")

    def on_mount(self) -> None:
        self.border_title = "VRAM split"

    def show(
        self,
        gpu: GpuReading,
        split: Split | None,
        info: ServerInfo | None,
        windows: WindowsGpuReading | None = None,
    ) -> None:
        self._show_windows(windows)
        bar = self.query_one(VramBar)
        figures = self.query_one("#vram-figures", Line)
        budget = self.query_one("#vram-budget", Line)
        detail = self.query_one("#vram-detail", Line)
        if not gpu.available or split is None:
            bar.split = None
            reason = gpu.error or "no GPU reading yet"
            figures.show(Content.assemble(("GPU readings unavailable: ", "bold $error"), reason))
            budget.show("Check that the NVIDIA driver works (nvidia-smi); the rest keeps updating.")
            detail.show("")
            return
        bar.split = split
        figures.show(
            Content.assemble(
                ("█ ", "$vram-server"),
                f"vLLM {gib(split.server_bytes)}  ",
                ("▓ ", "$vram-desktop"),
                f"desktop/other {gib(split.desktop_bytes)}  ",
                ("░ ", "$vram-free"),
                f"free {gib(split.free_bytes)}  ",
                (f"of {gib(split.total_bytes)} GiB", "$text-muted"),
            )
        )
        budget.show(_budget_line(split, info))
        detail.show(_detail_line(gpu, split))

    def _show_windows(self, windows: WindowsGpuReading | None) -> None:
        """WSL2: what Windows says — the desktop programs by name, and the WSL VM's memory
        in VRAM (dedicated) and in system memory (shared: a spill)."""
        line = self.query_one("#vram-windows", Line)
        line.set_class(windows is not None, "-shown")
        if windows is None:
            return
        if windows.panel_text is not None:
            line.show(Content.styled(windows.panel_text, "$text-warning"))
            return
        parts: list[str | tuple[str, str]] = [("windows: ", "$text-muted")]
        vm = windows.wsl_vm
        if vm is not None:
            parts.append(f"WSL VM {gib(vm.dedicated_bytes)} in VRAM, ")
            parts.append((f"{gib(vm.shared_bytes)} in system memory", "bold"))
            parts.append("  ")
        top = windows.desktop[:TOP_PROCESSES]
        parts.append("  ".join(f"{p.name} {gib(p.dedicated_bytes)}" for p in top))
        line.show(Content.assemble(*parts))


def _budget_line(split: Split, info: ServerInfo | None) -> Content:
    if split.budget_bytes is None:
        return Content("budget: not known (no --gpu-memory-utilization seen yet)")
    util = info.gpu_memory_utilization if info else None
    label = f"budget {util:.2f} × total = " if util is not None else "budget "
    parts: list[str | tuple[str, str]] = [
        ("▌ ", "$vram-budget"),
        f"{label}{gib(split.budget_bytes)} GiB",
    ]
    if split.headroom_bytes is not None:
        parts.append(" · leaves the desktop ")
        tight = split.desktop_bytes is not None and split.desktop_bytes > split.headroom_bytes
        parts.append((f"{gib(split.headroom_bytes)} GiB", "bold $error" if tight else "bold"))
        if split.desktop_bytes is not None:
            parts.append(f" (using {gib(split.desktop_bytes)})")
    return Content.assemble(*parts)


def _detail_line(gpu: GpuReading, split: Split) -> Content:
    device = gpu.devices[0]
    if split.method is SplitMethod.PER_PROCESS and device.processes:
        top = sorted(device.processes, key=lambda p: p.used_bytes, reverse=True)[:TOP_PROCESSES]
        names = "  ".join(f"{p.name} ({p.pid}) {gib(p.used_bytes)}" for p in top)
        return Content.assemble(("top: ", "$text-muted"), names)
    return Content.styled(split.detail, "$text-muted")
