"""Opened in the middle of a collapse (a simulated clock): the banner within 15 samples, with
a remembered normal rate, and on WSL2 with the Windows side, without one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.support.console import replay_app, text, ticks
from tests.support.synthetic import Card, build, busy
from vramtop.core.diagnosis.normal_rate import INTER_TOKEN_LATENCY, REMEMBERED, NormalRate
from vramtop.core.model import GIB, Sample
from vramtop.core.windows.reading import WindowsGpuReading, WindowsProcessGpu
from vramtop.session.writer import SessionWriter, make_header
from vramtop.tui.widgets.finding_banner import FindingBanner
from vramtop.tui.widgets.throughput_panel import ThroughputPanel

CALL = int(4.3 * GIB)


def windows_mid_call(t: float) -> WindowsGpuReading:
    vm = WindowsProcessGpu(9000, "vmmemWSL", int(27.5 * GIB), int(2.1 * GIB))
    teams = WindowsProcessGpu(10456, "ms-teams.exe", int(2.7 * GIB), 0)
    return WindowsGpuReading(processes=(vm, teams), wsl_vm=vm, desktop=(teams,), t=t)


def record_mid_collapse(
    path: Path, normal: NormalRate | None, windows: bool, wsl: bool = True
) -> None:
    """Only collapsed seconds: the console (or recorder) was opened during the call."""
    extra = {"normal_rate": normal.to_json()} if normal is not None else {}
    header = make_header(started_at="2026-11-30T20:00:00Z", wsl=wsl, extra=extra)
    ticks_ = [busy(float(t), tps=8.0, decode_tps=8.0, desktop_bytes=CALL) for t in range(1, 40)]
    with SessionWriter(path, header) as writer:
        for s in build(Card(wsl=wsl), ticks_):
            assert isinstance(s, Sample)
            writer.sample(replace(s, windows=windows_mid_call(s.t)) if windows else s)


async def banner_after(path: Path, samples: int) -> tuple[str, str]:
    now = [0.0]
    app, _backend = replay_app(path, lambda: now[0], speed=1.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 1)
        now[0] = float(samples)  # the replay plays the first `samples` seconds
        await ticks(pilot, 1)
        return text(app, FindingBanner), text(app, ThroughputPanel)


async def test_with_a_remembered_rate_the_banner_shows_within_15_samples(tmp_path: Path) -> None:
    path = tmp_path / "remembered.jsonl"
    normal = NormalRate({INTER_TOKEN_LATENCY: {1: 77.0}}, REMEMBERED, saved_at=1.0)
    record_mid_collapse(path, normal, windows=False)
    banner, throughput = await banner_after(path, 15)
    assert "squeezing vLLM" in banner and "remembered" in banner
    assert "normal 77" in throughput


async def test_on_wsl_the_windows_side_names_it_without_a_rate(tmp_path: Path) -> None:
    path = tmp_path / "no-rate.jsonl"
    record_mid_collapse(path, None, windows=True)
    banner, _ = await banner_after(path, 15)
    assert "squeezing vLLM" in banner and "no normal rate" in banner


async def test_a_per_process_split_names_it_and_learns_no_normal(tmp_path: Path) -> None:
    # Native Linux (NVML's per-process figures): the desktop holds what the budget kept for
    # vLLM. The banner names it from memory; the collapsed 8 tok/s is not shown as normal.
    path = tmp_path / "native.jsonl"
    record_mid_collapse(path, None, windows=False, wsl=False)
    banner, throughput = await banner_after(path, 15)
    assert "squeezing vLLM" in banner and "no normal rate" in banner
    assert "can't judge yet" in throughput and "normal 8" not in throughput


async def test_without_a_rate_or_the_windows_side_it_does_not_guess(tmp_path: Path) -> None:
    path = tmp_path / "nothing.jsonl"
    record_mid_collapse(path, None, windows=False)
    banner, _ = await banner_after(path, 15)
    assert "squeezing" not in banner
