"""One machine state, one remedy: the finding's remedy (the banner's `b`, `diagnose`), the
relaunch dialog, the what-if and `--once --json` name the same flags and the same desktop
headroom for the same samples."""

from __future__ import annotations

from tests.support.synthetic import Card, Event, Tick, build, busy
from vramtop.core.budget import outside_budget
from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.findings import VRAM_CONTENTION
from vramtop.core.headroom.calculator import predict
from vramtop.core.headroom.live_inputs import live_headroom_inputs
from vramtop.core.model import GIB, Sample
from vramtop.core.snapshot import server_util, snapshot
from vramtop.tui.screens.headroom_screen import _flag_words
from vramtop.tui.whatif import Machine, check_budget
from vramtop.tui.widgets.finding_banner import remedy_keys


def _collapse() -> tuple[Diagnoser, Sample]:
    # A desktop of 8 GiB beside a 0.93 budget whose pool holds one 65,536-token request: the
    # remedy's budget cannot, so it lowers --max-model-len too.
    items: list[Tick | Event] = [(0.0, "start", {}), (1.0, "ready", {})]
    items += [busy(float(t)) for t in range(2, 120)]
    items += [busy(float(t), tps=6.0, desktop_bytes=8 * GIB) for t in range(120, 200)]
    d, last = Diagnoser(), None
    for record in build(Card(wsl=False, max_model_len=65_536), items):
        if isinstance(record, tuple):
            d.feed_event(*record)
        else:
            d.feed_sample(record)
            last = record
    assert last is not None
    return d, last


def test_banner_dialog_whatif_and_diagnose_name_the_same_flags() -> None:
    d, sample = _collapse()
    finding = next(f for f in d.open_findings() if f.kind == VRAM_CONTENTION)
    util, length = finding.remedy.budget, finding.remedy.max_model_len
    assert util is not None and length is not None
    words = f"{util:.2f} with --max-model-len {length:,}"
    banner = "".join(p if isinstance(p, str) else p[0] for p in remedy_keys(finding.remedy))
    assert f"relaunch at {util:.2f}, max-model-len {length:,}" in banner
    assert len(banner) <= 77  # every key within an 80-column terminal
    assert f"--max-model-len {length:,}" in (finding.remedy.why or "")
    assert finding.remedy.to_json()["max_model_len"] == length  # diagnose --json

    outside = outside_budget(d.outside_budget_bytes)
    inputs = live_headroom_inputs(sample, d.outside_budget_bytes)
    assert inputs is not None
    device = sample.gpu.devices[0]
    desktop = sample.split.desktop_bytes if sample.split else None
    check = check_budget(
        f"{util:.2f}", inputs, Machine(device.total_bytes, desktop, outside_budget_bytes=outside)
    )
    assert check.reason is None and not check.needs_confirmation
    assert check.max_model_len == length  # the dialog hands the same ceiling back
    assert _flag_words(inputs, util).startswith(words)  # the what-if's suggestion


def test_the_vram_panel_once_and_the_dialog_say_one_headroom() -> None:
    d, sample = _collapse()
    inputs = live_headroom_inputs(sample, d.outside_budget_bytes)
    assert inputs is not None and sample.split is not None
    util = server_util(sample)
    assert util is not None
    panel = sample.split.headroom_bytes  # the VRAM panel's "leaves the desktop" figure
    once = snapshot(sample, wsl=False, demo=False)["split"]["headroom_bytes"]
    dialog = check_budget(f"{util:.2f}", inputs).prediction
    assert dialog is not None and panel is not None
    assert panel == once == dialog.desktop_headroom_bytes
    assert panel == predict(inputs, util).desktop_headroom_bytes  # the what-if's
