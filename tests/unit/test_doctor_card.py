"""`vramtop doctor` on the card's own figures (PCIe, utilisation) and, on WSL2, on whether the
kernel's residency-failure lines can be read and how to allow it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.ports import free_port
from vramtop import cli
from vramtop.core.model import GIB, GpuDevice, GpuReading
from vramtop.machines.doctor_report import render, run_checks
from vramtop.machines.setup_checks import Facts
from vramtop.sources import dxg_kmsg, host


def reading(**figures: object) -> GpuReading:
    device = GpuDevice(0, "NVIDIA GeForce RTX 5090", 32 * GIB, 30 * GIB, 2 * GIB, **figures)  # type: ignore[arg-type]
    return GpuReading(devices=(device,), source="nvml")


def checks(facts: Facts) -> dict[str, dict[str, str | None]]:
    _, report = run_checks(facts)
    return {c["name"]: c for c in report["checks"]}


def test_the_cards_figures_are_named_where_the_driver_gives_them() -> None:
    given = checks(Facts("nvml", reading(pcie_rx_bytes_per_s=1, gpu_util=0.5, memory_util=0.2)))
    assert given["card_counters"]["status"] == "ok"
    assert given["card_counters"]["detail"] == (
        "the card gives PCIe throughput, GPU utilisation, memory utilisation"
    )
    none = checks(Facts("nvml", reading()))
    assert none["card_counters"]["status"] == "skip"
    assert "no PCIe throughput" in str(none["card_counters"]["detail"])


def test_on_wsl2_an_unreadable_kernel_log_is_a_warning_with_how_to_allow_it() -> None:
    problem = "/dev/kmsg is not readable by this user (kernel.dmesg_restrict is 1)"
    wsl = checks(Facts("nvml", reading(), wsl=True, kernel_log_problem=problem))
    log = wsl["kernel_log"]
    assert log["status"] == "warn"
    assert str(log["detail"]).startswith(problem) and "-12" in str(log["detail"])
    assert "kernel.dmesg_restrict=0" in str(log["fix"])
    readable = checks(Facts("nvml", reading(), wsl=True))["kernel_log"]
    assert readable["status"] == "ok" and readable["fix"] is None
    assert checks(Facts("nvml", reading()))["kernel_log"]["status"] == "skip"  # not WSL2
    text = render(run_checks(Facts("nvml", reading(), wsl=True, kernel_log_problem=problem))[1])
    assert "warn  kernel_log" in text and "fix: allow reading the kernel log" in text


def test_the_command_on_wsl2_says_whether_it_can_read_the_kernel_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path))
    (tmp_path / "config").mkdir(mode=0o700)
    (tmp_path / "config" / "config.toml").write_text('gpu_probe = "amd-sysfs"\n')
    monkeypatch.setattr(host, "is_wsl", lambda: True)
    monkeypatch.setenv("PATH", str(tmp_path))  # no powershell.exe: the Windows checks skip
    real = dxg_kmsg.kmsg_problem
    monkeypatch.setattr(dxg_kmsg, "kmsg_problem", lambda: real(tmp_path / "kmsg"))
    cli.main(["doctor", "--json", "--url", f"http://127.0.0.1:{free_port()}"])
    report = json.loads(capsys.readouterr().out)
    log = {c["name"]: c for c in report["checks"]}["kernel_log"]
    assert log["status"] == "warn" and "does not exist" in log["detail"]
    (tmp_path / "kmsg").write_text("")
    cli.main(["doctor", "--json", "--url", f"http://127.0.0.1:{free_port()}"])
    report = json.loads(capsys.readouterr().out)
    assert {c["name"]: c for c in report["checks"]}["kernel_log"]["status"] == "ok"
