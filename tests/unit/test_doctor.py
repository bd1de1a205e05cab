"""`vramtop doctor`: the checks and the verdict from built facts, and the command itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.ports import free_port
from vramtop import cli
from vramtop.core.model import (
    GIB,
    GpuDevice,
    GpuReading,
    MemoryKind,
    ProcessMemory,
    ServerMetrics,
    ServerReading,
)
from vramtop.machines.doctor_report import render, run_checks
from vramtop.machines.setup_checks import Facts


def card(
    processes: tuple[ProcessMemory, ...] | None, kind: MemoryKind = MemoryKind.DEDICATED
) -> GpuReading:
    device = GpuDevice(
        0,
        "NVIDIA GeForce RTX 5090",
        32 * GIB,
        30 * GIB,
        2 * GIB,
        processes=processes,
        memory_kind=kind,
    )
    return GpuReading(devices=(device,), source="nvml")


def by_name(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"]}


def test_per_process_numbers_show_the_split() -> None:
    facts = Facts(probe_name="nvml", reading=card((ProcessMemory(1, "python3", GIB),)))
    code, report = run_checks(facts)
    assert (code, report["split"]) == (0, "per_process")
    assert by_name(report)["per_process"]["status"] == "ok"


def test_wsl_without_windows_counters_can_only_derive() -> None:
    facts = Facts(probe_name="nvml", reading=card(None), wsl=True, powershell=None)
    code, report = run_checks(facts)
    assert (code, report["split"]) == (3, "derived")
    checks = by_name(report)
    assert checks["per_process"]["status"] == "warn"
    assert checks["wsl"]["status"] == "fail" and "powershell.exe" in checks["wsl"]["detail"]
    assert checks["wsl"]["fix"]


def test_wsl_with_windows_counters_shows_the_split() -> None:
    facts = Facts(
        probe_name="nvml",
        reading=card(None),
        wsl=True,
        powershell="/mnt/c/Windows/System32/WindowsPowerShell/v1.0/powershell.exe",
        windows_vm="vmmemWSL",
    )
    code, report = run_checks(facts)
    assert (code, report["split"]) == (0, "windows")
    assert by_name(report)["windows_counters"]["status"] == "ok"


def test_windows_counters_failing_is_said_with_the_fix() -> None:
    facts = Facts(
        probe_name="nvml",
        reading=card(None),
        wsl=True,
        powershell="powershell.exe",
        windows_error="PowerShell's execution policy refused the script",
    )
    code, report = run_checks(facts)
    assert code == 3
    check = by_name(report)["windows_counters"]
    assert check["status"] == "fail" and "execution policy" in check["detail"] and check["fix"]


def test_unreadable_gpu_is_exit_4_with_the_fix() -> None:
    error = (
        "NVIDIA GeForce RTX 5090: NVML says reading its memory is not supported, and it is not "
        "a known integrated device, so it is not taken for unified memory"
    )
    facts = Facts(probe_name="nvml", reading=GpuReading(source="nvml", error=error))
    code, report = run_checks(facts)
    assert (code, report["split"]) == (4, "none")
    assert "nvml-unified" in by_name(report)["gpu"]["fix"]


def test_unified_memory_and_amd_access_are_reported() -> None:
    facts = Facts(
        probe_name="nvml",
        reading=card((ProcessMemory(1, "python3", GIB),), MemoryKind.UNIFIED),
        amd_cards=1,
        amdsmi_error="the amdsmi package does not import (No module named 'amdsmi')",
        fdinfo_denied=2,
    )
    _, report = run_checks(facts)
    checks = by_name(report)
    assert checks["unified_memory"]["status"] == "ok"
    assert "shared with the system" in checks["unified_memory"]["detail"]
    assert checks["amdsmi"]["status"] == "warn" and "sysfs" in checks["amdsmi"]["detail"]
    assert checks["fdinfo"]["status"] == "warn" and "2 process" in checks["fdinfo"]["detail"]


def test_server_profile_log_and_permissions(tmp_path: Path) -> None:
    loose = tmp_path / "logs"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    facts = Facts(
        probe_name="nvml",
        reading=card(()),
        profile="qwen",
        url="http://127.0.0.1:8000",
        server=ServerReading(
            url="http://127.0.0.1:8000",
            reachable=True,
            healthy=False,
            metrics=ServerMetrics(),
            version="0.32.0",
        ),
        log_path=tmp_path / "server-qwen.log",
        private_paths=[loose],
    )
    _, report = run_checks(facts)
    checks = by_name(report)
    assert checks["profile"]["status"] == "ok"
    assert checks["metrics"]["status"] == "ok" and "0.32.0" in checks["metrics"]["detail"]
    assert checks["health"]["status"] == "fail"
    assert checks["log"]["status"] == "warn"
    assert (
        checks["permissions"]["status"] == "warn"
        and "drwxr-xr-x" in checks["permissions"]["detail"]
    )
    text = render(report)
    assert text.splitlines()[-1].startswith("verdict: the console shows the split")
    assert all(
        line.startswith(("ok", "warn", "FAIL", "--", " ", "verdict")) for line in text.splitlines()
    )


def test_the_command_without_a_gpu_exits_4_with_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path))
    (tmp_path / "config").mkdir(mode=0o700)
    (tmp_path / "config" / "config.toml").write_text('gpu_probe = "amd-sysfs"\n')
    url = f"http://127.0.0.1:{free_port()}"
    code = cli.main(["doctor", "--json", "--url", url])
    report = json.loads(capsys.readouterr().out)
    assert code == report["exit_code"] == 4  # this machine has no GPU (and amd-sysfs: no card)
    gpu = by_name(report)["gpu"]
    assert gpu["status"] == "fail" and gpu["detail"].startswith("amd:")
    assert by_name(report)["metrics"]["status"] == "warn"


def test_a_broken_config_is_a_check_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path))
    (tmp_path / "config").mkdir(mode=0o700)
    (tmp_path / "config" / "config.toml").write_text('gpu_probe = "cuda"\n')
    code = cli.main(["doctor", "--url", f"http://127.0.0.1:{free_port()}"])
    out = capsys.readouterr().out
    assert code == 4
    assert "FAIL  config" in out and "gpu_probe" in out
