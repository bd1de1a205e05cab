"""The console's widgets, found once, and the drawing of a `ConsoleState` into them.

The App calls these on the event loop: the header (status line, server line), the finding
banner, and the panels (VRAM, KV pool, throughput, server log). Each panel keeps the history
it draws, from the frames it is given.
"""

from __future__ import annotations

from collections.abc import Mapping

from textual.dom import DOMNode

from vramtop.core.model import Sample, ServerState
from vramtop.machines.interface import FrameSource
from vramtop.tui.console_state import ConsoleState
from vramtop.tui.widgets.console_header import ConsoleHeader
from vramtop.tui.widgets.finding_banner import FindingBanner
from vramtop.tui.widgets.kv_pool_panel import KvPoolPanel
from vramtop.tui.widgets.server_log import ServerLog
from vramtop.tui.widgets.throughput_panel import ThroughputPanel
from vramtop.tui.widgets.vram_split_panel import VramSplitPanel


class Panels:
    """The widgets the console draws every tick (a query walks the screen each time: they
    are found once, on mount)."""

    def __init__(self, root: DOMNode) -> None:
        self.header = root.query_one(ConsoleHeader)
        self.banner = root.query_one(FindingBanner)
        self.vram = root.query_one(VramSplitPanel)
        self.kv = root.query_one(KvPoolPanel)
        self.throughput = root.query_one(ThroughputPanel)
        self.server_log = root.query_one(ServerLog)

    def draw(
        self,
        shown: ConsoleState,
        sample: Sample,
        log_lines: list[str],
        *,
        log_kept: bool,
        start_key: str,
    ) -> None:
        """The panels below the banner from `sample` (the one `shown` holds); `log_lines`:
        all the backend keeps when `log_kept`; `start_key`: the key that starts the server."""
        from vramtop.core import sample_facts

        self.vram.show(
            sample.gpu, sample.split, sample.info, sample.windows, util=sample_facts.util(sample)
        )
        self.kv.show(sample)
        self.throughput.show(shown.frame)
        notice = _log_notice(sample, start_key)
        # A replay's last frame stays on screen: a count held back is drawn now.
        now = None if shown.ended else sample.t
        self.server_log.show(log_lines, notice or shown.frame.log_notice, now=now, kept=log_kept)

    def draw_banner(
        self, shown: ConsoleState, *, short: bool, can_act: bool, keys: Mapping[str, str]
    ) -> bool:
        """The finding banner; returns whether it opened or closed (d is offered while a
        finding is open)."""
        had = self.banner.has_class("-open")
        findings = shown.findings
        self.banner.show(
            findings,
            details=shown.banner_details,
            short=short,
            can_act=can_act,
            keys=keys,
            throughput=shown.frame.throughput,
            now=shown.sample.t if shown.sample is not None else None,
        )
        return had != bool(findings)

    def draw_header(
        self, shown: ConsoleState, now: float, backend: FrameSource, acting: str | None
    ) -> None:
        """`acting`: the state word of the action running (see `ActionRunner.acting`)."""
        self.header.show(
            shown.sample,
            now,
            wsl=backend.wsl,
            call_on=shown.frame.call_on,
            demo=backend.demo,
            profile=backend.profile_name,
            activity=shown.activity,
            acting=acting,
            recorded=backend.recorded,
            under_way=shown.frame.under_way,
        )


def _log_notice(sample: Sample, start_key: str) -> str | None:
    info = sample.info
    if info and info.state is ServerState.CRASHED:
        return f"vLLM exited: the last lines say why · {start_key} starts it again"
    return None
