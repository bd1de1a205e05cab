"""The PowerShell source against a fake `powershell.exe` first on PATH, and the simulated side.

The fake is a real long-lived process that decodes the -EncodedCommand script and prints the
GPU counter classes' JSON lines; env vars switch it into slow starts, crashes, errors and a
field-report call. Intervals are tens of milliseconds so the tests stay fast.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.waiting import PROCESS_S, wait_until
from vramtop.core.model import GIB
from vramtop.core.windows.reading import WindowsGpuReading
from vramtop.core.windows.spill import SpillTracker
from vramtop.sim.machine import SimMachine
from vramtop.sim.windows_side import SimWindowsSource
from vramtop.sources import wsl_powershell
from vramtop.sources.windows_counters import WindowsGpuSource
from vramtop.sources.wsl_powershell import describe_exit, find_powershell, interop_problem

FAKE_DIR = Path(__file__).parent.parent / "fixtures" / "fake_powershell"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{FAKE_DIR}{os.pathsep}{env.get('PATH', '')}"
    env["VRAMTOP_FAKE_PS_LOG"] = str(tmp_path / "starts.log")
    env["VRAMTOP_FAKE_PS_INTERVAL_S"] = "0.03"
    return env


@pytest.fixture
def make_source(fake_env: dict[str, str]) -> Iterator[Callable[..., WindowsGpuSource]]:
    sources: list[WindowsGpuSource] = []

    def make(
        mode: str = "normal", env: dict[str, str] | None = None, **kw: Any
    ) -> WindowsGpuSource:
        e = dict(fake_env, VRAMTOP_FAKE_PS_MODE=mode, **(env or {}))
        kw.setdefault("backoff_s", (0.05,))
        kw.setdefault("check_interop", False)
        source = WindowsGpuSource(interval_s=0.03, env=e, **kw)
        sources.append(source)
        return source

    yield make
    for s in sources:
        s.close()


def wait_for(
    source: WindowsGpuSource | SimWindowsSource,
    ok: Callable[[WindowsGpuReading], bool],
    timeout_s: float = PROCESS_S,
) -> WindowsGpuReading:
    last = [source.read()]

    def held() -> WindowsGpuReading | None:
        last[0] = source.read()
        return last[0] if ok(last[0]) else None

    return wait_until(held, deadline_s=timeout_s, what=lambda: f"a reading; last: {last[0]}")


def starts(env: dict[str, str]) -> list[int]:
    log = Path(env["VRAMTOP_FAKE_PS_LOG"])
    return [int(x) for x in log.read_text().split()] if log.exists() else []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat_line = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}").exists() else ""
    return stat_line.rpartition(")")[2].split()[:1] != ["Z"]


def test_powershell_is_found_first_on_path(fake_env: dict[str, str]) -> None:
    assert find_powershell(fake_env["PATH"]) == str(FAKE_DIR / "powershell.exe")


def test_not_found_anywhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(wsl_powershell, "DEFAULT_POWERSHELL", str(tmp_path / "nope.exe"))
    assert find_powershell(str(tmp_path)) is None
    source = WindowsGpuSource(env={"PATH": str(tmp_path)}, check_interop=False)
    try:
        r = wait_for(source, lambda r: "not found" in (r.error or ""))
        assert r.panel_text is not None
        assert r.panel_text.startswith("Windows side not available: powershell.exe not found")
    finally:
        source.close()


def test_a_normal_loop_names_the_vm_and_the_desktop(make_source: Any) -> None:
    source = make_source("normal")
    r = wait_for(source, lambda r: r.available)
    assert r.wsl_vm is not None and r.wsl_vm.name == "vmmemWSL"
    assert r.wsl_vm.dedicated_bytes > 29 * GIB
    names = [p.name for p in r.desktop]
    assert names[:3] == ["msedge.exe", "dwm.exe", "ms-teams.exe"]
    assert "vmmem" in names and "pid 777" in names  # a Sandbox VM and an exited process
    assert r.adapter_luid == "0x00000000_0x0000c3f1"
    assert source.restarts == 0


def test_read_never_waits_for_a_slow_start(make_source: Any, fake_env: dict[str, str]) -> None:
    clock = FakeClock()
    source = make_source("slow", {"VRAMTOP_FAKE_PS_START_DELAY_S": "30"}, clock=clock)
    first = source.read()
    assert first.error is not None and first.error.startswith("waiting for PowerShell")
    # The fake is running (it logged its start) and still silent: every read answers anyway.
    wait_until(lambda: starts(fake_env), deadline_s=PROCESS_S, what="the fake PowerShell's start")
    assert len(starts(fake_env)) == 1
    clock.now += 7
    readings = [source.read() for _ in range(50)]
    assert all(not r.available for r in readings)
    assert readings[-1].error == "waiting for PowerShell (started 7 s ago)"


def test_a_crashing_powershell_is_restarted(make_source: Any, fake_env: dict[str, str]) -> None:
    source = make_source("crash", {"VRAMTOP_FAKE_PS_CRASH_AFTER": "2"})
    wait_for(source, lambda r: r.available)
    wait_until(
        lambda: source.restarts >= 2 and len(starts(fake_env)) >= 3,
        deadline_s=PROCESS_S,
        what="two restarts",
    )
    assert source.restarts >= 2
    assert len(starts(fake_env)) >= 3  # three real processes: the first and two restarts
    # After the restarts it still produces readings.
    wait_for(source, lambda r: r.available)


def test_a_crash_says_why_until_the_next_start_answers(make_source: Any) -> None:
    source = make_source(
        "crash", {"VRAMTOP_FAKE_PS_CRASH_AFTER": "1"}, backoff_s=(60.0,)
    )  # no restart within the test: the reason stays visible
    r = wait_for(source, lambda r: "exited" in (r.error or ""))
    assert r.error == "PowerShell exited with code 3"


def test_execution_policy_is_named(make_source: Any, fake_env: dict[str, str]) -> None:
    source = make_source("policy")
    r = wait_for(source, lambda r: "execution policy" in (r.error or ""))
    assert r.panel_text is not None and "running scripts is disabled" in r.panel_text
    wait_until(lambda: len(starts(fake_env)) >= 2, deadline_s=PROCESS_S, what="a second start")
    assert len(starts(fake_env)) >= 2  # retried with backoff, not given up or spinning dead


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("cim_error", "the GPU counter query failed: Provider load failure"),
        ("absent", "no GPU performance counters"),
        ("empty", "no GPU memory counters"),
        ("garbage", "not JSON"),
    ],
)
def test_errors_become_clear_reasons(make_source: Any, mode: str, words: str) -> None:
    source = make_source(mode)
    r = wait_for(source, lambda r: words in (r.error or ""))
    assert r.panel_text is not None and r.panel_text.startswith("Windows side not available: ")
    assert source.restarts == 0  # an error line is not a dead process


def test_a_lone_instance_quirk_still_reads(make_source: Any) -> None:
    source = make_source("single")
    r = wait_for(source, lambda r: r.available)
    assert r.wsl_vm is not None and r.wsl_vm.dedicated_bytes == GIB


def test_silence_after_data_is_reported_stale(make_source: Any) -> None:
    clock = FakeClock()
    source = make_source(
        "normal", {"VRAMTOP_FAKE_PS_INTERVAL_S": "100"}, clock=clock, stale_after_s=10
    )
    wait_for(source, lambda r: r.available)
    clock.now += 60
    assert source.read().error == "PowerShell has not answered for 60 s"


def test_close_kills_powershell(make_source: Any, fake_env: dict[str, str]) -> None:
    source = make_source("normal")
    wait_for(source, lambda r: r.available)
    (pid,) = starts(fake_env)
    assert alive(pid)
    source.close()
    assert not alive(pid)
    assert source.read().error is not None


def test_the_field_report_call_is_observed_as_a_spill(make_source: Any, tmp_path: Path) -> None:
    # The call starts once the test has seen the desktop without it (at a line of its own, a
    # busy machine's first look came after the call had begun, with no baseline before it).
    call = tmp_path / "call"
    source = make_source("call", {"VRAMTOP_FAKE_PS_CALL_FILE": str(call)})
    tracker = SpillTracker()
    seen: list[WindowsGpuReading] = []

    def seen_now() -> int:
        r = source.read()
        if r.available and (not seen or r is not seen[-1]):
            seen.append(r)
            tracker.add(r)
        return len(seen)

    wait_until(lambda: seen_now() >= 3, deadline_s=PROCESS_S, what="3 readings", poll_s=0.005)
    call.touch()
    wait_until(
        lambda: seen_now() > 8 and tracker.spill_evidence() is not None,
        deadline_s=PROCESS_S,
        what="the spill seen in 9 readings",
        poll_s=0.005,
    )
    ev = tracker.spill_evidence()
    assert ev is not None and ev.level == "observed"
    assert ev.baseline_shared_bytes < 200 * 1024**2
    assert ev.rise_bytes > 2 * GIB
    last = seen[-1]
    assert last.desktop[0].name == "ms-teams.exe"  # the call app now holds the most VRAM
    assert last.wsl_vm is not None and last.wsl_vm.dedicated_bytes < seen[0].wsl_vm.dedicated_bytes  # type: ignore[union-attr]


def test_interop_detection(tmp_path: Path) -> None:
    binfmt = tmp_path / "binfmt_misc"
    binfmt.mkdir()
    (binfmt / "register").touch()
    (binfmt / "status").touch()
    assert interop_problem(binfmt) is not None and "interop is disabled" in interop_problem(binfmt)  # type: ignore[operator]
    (binfmt / "WSLInterop-late").touch()
    assert interop_problem(binfmt) is None
    assert interop_problem(tmp_path / "not-mounted") is None


def test_interop_off_is_the_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fake_env: dict[str, str]
) -> None:
    binfmt = tmp_path / "binfmt_misc"
    binfmt.mkdir()
    (binfmt / "register").touch()
    monkeypatch.setattr(wsl_powershell, "BINFMT_DIR", binfmt)
    source = WindowsGpuSource(env=fake_env, check_interop=True)
    try:
        r = wait_for(source, lambda r: "interop" in (r.error or ""))
        assert "/etc/wsl.conf" in (r.error or "")
        assert starts(fake_env) == []  # nothing was run
    finally:
        source.close()


def test_exec_format_error_points_at_interop(tmp_path: Path) -> None:
    exe = tmp_path / "powershell.exe"
    exe.write_bytes(b"MZ\x90\x00\x03\x00\x00\x00")  # a Windows PE header Linux cannot run
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    source = WindowsGpuSource(env={"PATH": str(tmp_path)}, check_interop=False)
    try:
        r = wait_for(source, lambda r: "interop" in (r.error or ""))
        assert "Exec format error" in (r.error or "")
    finally:
        source.close()


def test_describe_exit_reads_clixml_errors() -> None:
    clixml = (
        '#< CLIXML <Objs Version="1.1.0.1"><S S="Error">File x.ps1 cannot be loaded. See '
        "about_Execution_Policies_x000D__x000A_</S></Objs>"
    )
    text = describe_exit(1, [clixml])
    assert text.startswith("PowerShell's execution policy refused the script")
    assert "<S" not in text
    assert describe_exit(5, []) == "PowerShell exited with code 5"


def test_simulated_windows_side_shows_a_spill_during_a_call(tmp_path: Path) -> None:
    with SimMachine(tmp_path / "sim", speed=20.0, startup_s=0.1) as machine:
        source = SimWindowsSource(machine.socket_path)
        before = wait_for(source, lambda r: r.available)
        assert before.source == "sim" and before.wsl_vm is not None
        assert [p.name for p in before.desktop] == ["msedge.exe", "dwm.exe", "ms-teams.exe"]
        total = int(machine.state()["device"]["total_bytes"])
        answer = machine.client.request(
            "alloc", pid=os.getpid(), name="python3", bytes=total - int(1.5 * GIB), kind="server"
        )
        assert answer["ok"], answer
        tracker = SpillTracker()
        tracker.add(
            wait_for(source, lambda r: r.wsl_vm is not None and r.wsl_vm.dedicated_bytes > GIB)
        )
        base_shared = before.wsl_vm.shared_bytes
        machine.set_call(True)
        r = wait_for(
            source, lambda r: r.wsl_vm is not None and r.wsl_vm.shared_bytes > base_shared + GIB
        )
        tracker.add(r)
        assert tracker.spill_evidence() is not None
        assert r.desktop[0].name == "ms-teams.exe"
        source.close()
        assert source.read().error is not None


@pytest.mark.slow
def test_a_silent_powershell_is_killed_and_started_again(
    make_source: Any, fake_env: dict[str, str]
) -> None:
    # One line, then nothing for 100 s: a CIM query that never returns.
    source = make_source("normal", {"VRAMTOP_FAKE_PS_INTERVAL_S": "100"}, hang_after_s=2.0)
    wait_for(source, lambda r: r.available)
    wait_for(source, lambda r: len(starts(fake_env)) >= 2)
    first = starts(fake_env)[0]
    assert not alive(first)
    assert source.restarts >= 1


def test_close_during_a_slow_start_leaves_no_powershell(
    make_source: Any, fake_env: dict[str, str]
) -> None:
    source = make_source("slow", {"VRAMTOP_FAKE_PS_START_DELAY_S": "30"})
    source.start()
    wait_until(lambda: starts(fake_env), deadline_s=PROCESS_S, what="the fake PowerShell's start")
    (pid,) = starts(fake_env)
    source.close()
    assert not alive(pid)


def test_a_powershell_that_exits_leaving_a_child_on_its_output_is_started_again(
    make_source: Any, fake_env: dict[str, str], tmp_path: Path
) -> None:
    """The child held the reader on PowerShell's output forever: no restart, no reading."""
    children = tmp_path / "children.log"
    source = make_source("orphan", {"VRAMTOP_FAKE_PS_CHILD_LOG": str(children)})
    wait_for(source, lambda r: len(starts(fake_env)) >= 2)
    first = int(children.read_text().split()[0])
    wait_for(source, lambda r: not alive(first))  # the child PowerShell left went with it


def test_powershell_starts_from_windows_own_drive_where_there_is_one(
    make_source: Any, tmp_path: Path
) -> None:
    cwds = tmp_path / "cwds.log"
    drive = tmp_path / "c"
    drive.mkdir()
    for where in (drive, tmp_path / "no-drive"):
        source = make_source("normal", {"VRAMTOP_FAKE_PS_CWD_LOG": str(cwds)}, windows_drive=where)
        wait_for(source, lambda r: r.available)
        source.close()
    assert cwds.read_text().splitlines() == [str(drive), os.getcwd()]
