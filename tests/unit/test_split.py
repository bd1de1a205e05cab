from vramtop.core.model import GIB, MIB, GpuDevice, ProcessMemory, SplitMethod
from vramtop.core.split import OUTSIDE_BUDGET_ESTIMATE_BYTES, budget_bytes, split_card

TOTAL = 32607 * MIB


def device(used: int, processes: tuple[ProcessMemory, ...] | None) -> GpuDevice:
    return GpuDevice(0, "NVIDIA GeForce RTX 5090", TOTAL, used, TOTAL - used, processes=processes)


def test_budget_is_the_ceiling_of_total_times_util() -> None:
    assert budget_bytes(1000, 0.931) == 931
    assert budget_bytes(1001, 0.5) == 501


def test_per_process_split_sums_the_server_tree() -> None:
    procs = (
        ProcessMemory(100, "VLLM::EngineCore", 29 * GIB),
        ProcessMemory(101, "vllm", 1 * GIB),
        ProcessMemory(7, "teams", 2 * GIB),
    )
    split = split_card(
        device(32 * GIB, procs), server_pids={100, 101}, server_running=True, util=0.93
    )
    assert split.method is SplitMethod.PER_PROCESS
    assert split.server_bytes == 30 * GIB
    assert split.desktop_bytes == 2 * GIB
    assert split.budget_bytes == budget_bytes(TOTAL, 0.93)


def test_wsl_split_is_derived_from_the_budget_and_says_so() -> None:
    used = 31_300 * MIB  # the field report's 32,049 MiB card was nearly full
    split = split_card(device(used, None), server_pids={100}, server_running=True, util=0.93)
    assert split.method is SplitMethod.DERIVED
    assert split.server_bytes == budget_bytes(TOTAL, 0.93) + OUTSIDE_BUDGET_ESTIMATE_BYTES
    assert split.desktop_bytes == used - split.server_bytes
    assert "WSL2" in split.detail and "0.93" in split.detail
    # 0.93 leaves the desktop a little under 2 GiB once the context is counted
    assert 1.5 * GIB < split.headroom_bytes < 2.3 * GIB


def test_without_budget_or_processes_the_split_is_unknown_not_guessed() -> None:
    split = split_card(device(20 * GIB, None), server_running=True, util=None)
    assert split.method is SplitMethod.UNKNOWN
    assert split.server_bytes is None and split.desktop_bytes is None


def test_no_server_means_everything_used_is_desktop() -> None:
    split = split_card(device(3 * GIB, None), server_running=False, util=0.93)
    assert split.server_bytes == 0 and split.desktop_bytes == 3 * GIB


def test_windows_counters_name_the_desktop_and_give_the_vms_share() -> None:
    from vramtop.core.split import split_from_windows
    from vramtop.core.windows.reading import WindowsGpuReading, WindowsProcessGpu

    vm = WindowsProcessGpu(9000, "vmmemWSL", 28 * GIB, 2 * GIB)
    teams = WindowsProcessGpu(10456, "ms-teams.exe", int(2.5 * GIB), 0)
    windows = WindowsGpuReading(processes=(vm, teams), wsl_vm=vm, desktop=(teams,))
    split = split_from_windows(device(31 * GIB, None), windows, util=0.93)
    assert split is not None
    assert split.method is SplitMethod.WINDOWS
    assert split.server_bytes == 28 * GIB and split.desktop_bytes == 3 * GIB
    assert "ms-teams.exe" in split.detail and "system memory" in split.detail


def test_windows_without_a_vm_falls_back() -> None:
    from vramtop.core.split import split_from_windows
    from vramtop.core.windows.reading import unavailable

    assert split_from_windows(device(31 * GIB, None), unavailable("interop off"), util=0.93) is None
