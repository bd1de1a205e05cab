"""What the server holds beyond its budget, as the diagnosis measures it: the figure every
budget's desktop headroom is counted with (the VRAM panel's and the what-ifs')."""

from __future__ import annotations

from tests.support.synthetic import OUTSIDE_BUDGET_BYTES, Card, Tick, build, busy
from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.model import GIB, MIB, Sample


def test_the_desktop_pushing_the_servers_memory_out_is_not_taken_for_less_outside() -> None:
    # Native Linux: the desktop grows 100 MiB a second and pushes the server's memory out a
    # tick at a time, through its budget and below, before any collapse is named.
    card = Card(wsl=False)
    items: list[Tick | tuple[float, str, dict[str, object]]] = [
        (0.0, "start", {}),
        (1.0, "ready", {}),
    ]
    items += [busy(float(t)) for t in range(2, 30)]
    items += [
        busy(float(t), desktop_bytes=int(1.35 * GIB) + (t - 29) * 100 * MIB) for t in range(30, 45)
    ]
    diagnoser = Diagnoser()
    seen: list[int | None] = []
    squeezed = False
    for item in build(card, items):
        if isinstance(item, Sample):
            diagnoser.feed_sample(item)
            assert item.split is not None and item.split.server_bytes is not None
            squeezed |= item.split.server_bytes < (item.split.budget_bytes or 0)
            if item.t >= 2:
                seen.append(diagnoser.outside_budget_bytes)
        else:
            diagnoser.feed_event(*item)
    assert squeezed, "the desktop never pushed the server below its budget"
    assert set(seen) == {OUTSIDE_BUDGET_BYTES}
