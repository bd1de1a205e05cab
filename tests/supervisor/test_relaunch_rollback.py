"""A relaunch that cannot start goes back to the flags that served (real processes on the
simulated machine, whose fake vLLM refuses a budget that does not fit): the cause in vLLM's
own words, the failed flags forgotten, the profile and its file changed only once the new
server serves."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sim_helpers import sim_api_servers, sim_profile

from tests.support import http
from vramtop.config import Profile
from vramtop.core.model import ServerState
from vramtop.core.remedy import FlagChange, RelaunchOrder
from vramtop.core.vllm import args as vllm_args
from vramtop.machines.demo_world import memory_released_check
from vramtop.machines.machine_backend import MachineBackend
from vramtop.machines.sampler import Sampler
from vramtop.profile_file import load_profile_file
from vramtop.sim.machine import SimMachine
from vramtop.supervisor import Supervisor, state

# The simulated card (31.84 GiB, the desktop holding some of it) cannot give 0.99 of itself;
# at 0.3 the weights fit but not one KV block does. 0.9 starts with a shorter model length.
NO_ROOM = 0.99
NO_KV_BLOCK = 0.3
FITS = 0.9
SHORT = 32768


@pytest.fixture
def machine(home: Path) -> Iterator[SimMachine]:
    with SimMachine(home / "sim", speed=20.0, startup_s=0.2) as sim:
        yield sim


def supervisor_for(machine: SimMachine, profile: Profile) -> Supervisor:
    return Supervisor(profile, memory_released=memory_released_check(machine))


def served_budget(profile: Profile) -> str:
    """The budget the server answering on the profile's port says it runs with."""
    text = http.get(f"{profile.url}/metrics", timeout=2).text
    line = next(x for x in text.splitlines() if x.startswith("vllm:cache_config_info{"))
    return line.split('gpu_memory_utilization="')[1].split('"')[0]


def test_a_budget_that_cannot_start_leaves_the_previous_server_serving(
    machine: SimMachine,
) -> None:
    sup = supervisor_for(machine, sim_profile(machine, "back"))
    assert sup.start().ok
    result = sup.relaunch(RelaunchOrder(FlagChange(NO_ROOM)))
    assert not result.ok and result.rolled_back, result
    assert result.message.startswith("relaunch at 0.99 failed: out of memory at startup")
    assert result.message.endswith("; the previous flags (0.93) serve again")
    info = sup.status()
    assert info.state == ServerState.RUNNING
    assert info.budget == 0.93
    rec = state.load("back")
    assert rec is not None and rec.flag_overrides == {}
    assert served_budget(sup.profile) == "0.93"
    assert sup.profile.flag(vllm_args.GPU_MEMORY_UTILIZATION) == "0.93"
    assert len(sim_api_servers(machine)) == 1
    assert sup.stop().ok


def test_the_cause_shown_is_vllms_own_line_not_the_engines_death(machine: SimMachine) -> None:
    sup = supervisor_for(machine, sim_profile(machine, "cause"))
    assert sup.start().ok
    result = sup.relaunch(RelaunchOrder(FlagChange(NO_KV_BLOCK)))
    assert result.rolled_back, result
    assert "relaunch at 0.3 failed: No available memory for the cache blocks" in result.message
    assert "EngineDeadError" not in result.message and "engine died" not in result.message
    assert sup.status().state == ServerState.RUNNING
    assert sup.stop().ok


@pytest.mark.slow
def test_a_failed_relaunchs_flags_do_not_stick(machine: SimMachine) -> None:
    sup = supervisor_for(machine, sim_profile(machine, "stick"))
    assert sup.start().ok
    assert sup.relaunch(RelaunchOrder(FlagChange(NO_ROOM))).rolled_back
    # The next relaunch changes the model length only: the budget is the one that served.
    assert sup.relaunch(RelaunchOrder(FlagChange(max_model_len=65536))).ok
    info = sup.status()
    assert info.budget == 0.93 and info.max_model_len == 65536
    assert sup.restart().ok
    assert sup.status().budget == 0.93
    rec = state.load("stick")
    assert rec is not None
    assert rec.flag_overrides == {vllm_args.MAX_MODEL_LEN: "65536"}
    assert sup.stop().ok


def test_a_relaunch_of_a_stopped_server_that_fails_forgets_its_flags(
    machine: SimMachine,
) -> None:
    sup = supervisor_for(machine, sim_profile(machine, "cold"))
    result = sup.relaunch(RelaunchOrder(FlagChange(NO_ROOM)))
    assert not result.ok and not result.rolled_back
    assert result.message.startswith("relaunch at 0.99 failed: out of memory at startup")
    rec = state.load("cold")
    assert rec is not None and rec.state == "crashed" and rec.flag_overrides == {}
    assert sup.start().ok  # the profile's own budget, not the one that failed
    assert sup.status().budget == 0.93
    assert sup.stop().ok


def test_a_precheck_that_refuses_leaves_the_server_serving(machine: SimMachine) -> None:
    sup = supervisor_for(machine, sim_profile(machine, "pre"))
    assert sup.start().ok
    before = sup.status()
    asked: list[tuple[dict[str, str], ServerState]] = []

    def refuse(change: FlagChange) -> str | None:
        asked.append((change.argv_changes(), sup.status().state))
        return "the desktop needs that memory now"

    result = sup.relaunch(RelaunchOrder(FlagChange(0.5, max_model_len=4096), precheck=refuse))
    assert result.ok is False and result.message == "the desktop needs that memory now"
    # Asked with the changed flags while the old server still served.
    assert asked == [
        (
            {vllm_args.GPU_MEMORY_UTILIZATION: "0.5", vllm_args.MAX_MODEL_LEN: "4096"},
            ServerState.RUNNING,
        )
    ]
    after = sup.status()
    assert after.state == ServerState.RUNNING and after.pid == before.pid
    assert sup.profile.flag(vllm_args.GPU_MEMORY_UTILIZATION) == "0.93"
    assert not sup.profile.history

    passed: list[dict[str, str]] = []
    assert sup.relaunch(
        RelaunchOrder(
            FlagChange(FITS, max_model_len=SHORT),
            precheck=lambda c: passed.append(c.argv_changes()),
        )
    ).ok
    assert passed == [{vllm_args.GPU_MEMORY_UTILIZATION: "0.9", vllm_args.MAX_MODEL_LEN: "32768"}]
    assert sup.status().budget == FITS
    assert sup.stop().ok


def test_the_profile_changes_only_once_the_new_server_serves(machine: SimMachine) -> None:
    sup = supervisor_for(machine, sim_profile(machine, "prof"))
    length = sup.profile.flag(vllm_args.MAX_MODEL_LEN)
    assert sup.start().ok
    assert sup.relaunch(RelaunchOrder(FlagChange(NO_ROOM))).rolled_back
    assert sup.profile.flag(vllm_args.GPU_MEMORY_UTILIZATION) == "0.93"
    assert sup.profile.history == []
    assert sup.relaunch(RelaunchOrder(FlagChange(FITS, max_model_len=SHORT))).ok
    assert sup.profile.flag(vllm_args.GPU_MEMORY_UTILIZATION) == "0.9"
    assert [(c.old, c.new) for c in sup.profile.history] == [("0.93", "0.9"), (length, "32768")]
    assert sup.stop().ok


def profile_file(machine: SimMachine, home: Path, name: str, file_name: str) -> Path:
    """A profile file as a person keeps it: commented, one flag and its value a line."""
    profile = sim_profile(machine, name)
    words = ",\n".join(f'  "{word}"' for word in profile.argv)
    env = "\n".join(f'{key} = "{value}"' for key, value in profile.env.items())
    path = home / "profiles" / f"{file_name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'# my simulated server\nname = "{name}"\nargv = [\n{words},\n]  # its command\n'
        f"stop_timeout_s = 5  # quick\n\n[env]\n{env}\n"
    )
    return path


def test_save_after_a_failed_start_leaves_the_file_as_it_was(
    machine: SimMachine, home: Path
) -> None:
    path = profile_file(machine, home, "kept", "kept")
    before = path.read_bytes()
    sup = supervisor_for(machine, load_profile_file(path))
    assert sup.start().ok
    assert sup.relaunch(RelaunchOrder(FlagChange(NO_ROOM), save=True)).rolled_back
    assert path.read_bytes() == before
    assert sup.stop().ok


def test_save_writes_the_file_it_loaded_and_keeps_its_comments(
    machine: SimMachine, home: Path
) -> None:
    original = profile_file(machine, home, "orig", "orig")
    untouched = original.read_bytes()
    # A copy under another file name whose `name` still says "orig".
    copy = home / "profiles" / "copy.toml"
    copy.write_bytes(untouched)
    sup = supervisor_for(machine, load_profile_file(copy))
    length = sup.profile.flag(vllm_args.MAX_MODEL_LEN)
    assert sup.start().ok
    assert sup.relaunch(RelaunchOrder(FlagChange(FITS, max_model_len=SHORT), save=True)).ok
    assert original.read_bytes() == untouched
    text = copy.read_text()
    assert text.startswith("# my simulated server\n")
    assert "]  # its command\n" in text and "stop_timeout_s = 5  # quick\n" in text
    assert '  "--gpu-memory-utilization",\n  "0.9",\n' in text
    assert '  "--max-model-len",\n  "32768",\n' in text
    saved = load_profile_file(copy)
    assert saved.flag(vllm_args.GPU_MEMORY_UTILIZATION) == "0.9"
    assert [(c.flag, c.old, c.new) for c in saved.history] == [
        (vllm_args.GPU_MEMORY_UTILIZATION, "0.93", "0.9"),
        (vllm_args.MAX_MODEL_LEN, length, "32768"),
    ]
    # The file says the budget now: the record no longer carries it as an override.
    rec = state.load("orig")
    assert rec is not None and rec.flag_overrides == {}
    assert sup.stop().ok


def backend_for(machine: SimMachine, sup: Supervisor) -> MachineBackend:
    sampler = Sampler(
        probe=machine.probe(),
        url=sup.profile.url,
        info=sup.status,
        log_path=lambda: sup.log_path,
    )
    return MachineBackend(sampler=sampler, supervisor=sup)


def profile_flags(backend: MachineBackend) -> FlagChange | None:
    """The flags the profile's file launches with (`ProfileLaunch.flags`)."""
    launch = backend.profile_launch
    return launch.flags if launch is not None else None


def relaunch_events(backend: MachineBackend) -> list[dict[str, object]]:
    """The relaunch events' fields, less the start's phases (tests/unit/test_start_phases)."""
    events = [dict(e.detail) for e in backend.session.events() if e.name == "relaunch"]
    return [{k: v for k, v in e.items() if k != "phases"} for e in events]


def test_the_relaunch_event_is_recorded_with_its_result(machine: SimMachine) -> None:
    sup = supervisor_for(machine, sim_profile(machine, "ev"))
    backend = backend_for(machine, sup)
    try:
        assert sup.start().ok
        refused = backend.relaunch(RelaunchOrder(FlagChange(0.5), precheck=lambda c: "not now"))
        assert refused.message == "not now"
        assert relaunch_events(backend) == []  # nothing happened to the server
        assert backend.relaunch(RelaunchOrder(FlagChange(NO_ROOM))).rolled_back
        assert relaunch_events(backend) == [
            {"gpu_memory_utilization": NO_ROOM, "result": "rolled_back"}
        ]
        assert backend.launch_budget == 0.93
        launched = profile_flags(backend)
        assert launched is not None and launched.budget == 0.93
        assert backend.relaunch(RelaunchOrder(FlagChange(FITS, max_model_len=SHORT))).ok
        # The new start's phases, as vLLM's log said them.
        last = [e for e in backend.session.events() if e.name == "relaunch"][-1]
        assert last.detail["phases"]["weights_s"] > 0
        assert relaunch_events(backend)[-1] == {
            "gpu_memory_utilization": FITS,
            "max_model_len": SHORT,
            "result": "ok",
        }
        assert backend.launch_budget == FITS
        # The profile's file still launches at its own flags (the relaunch was not saved):
        # what the console's way back after a call goes back to.
        assert profile_flags(backend) == launched
    finally:
        backend.close(stop_server=True)
    assert sim_api_servers(machine) == []


def test_save_on_a_profile_that_is_a_link_is_refused_before_the_stop(
    machine: SimMachine, home: Path
) -> None:
    # The link (a profile kept with dotfiles) is neither replaced with a file nor written
    # through: refused before anything stops, the server serving as it was.
    kept = profile_file(machine, home, "linked", "linked")
    target = home / "dotfiles" / "linked.toml"
    target.parent.mkdir()
    kept.rename(target)
    kept.symlink_to(target)
    untouched = target.read_bytes()
    sup = supervisor_for(machine, load_profile_file(kept))
    assert sup.start().ok
    served = state.load("linked")
    assert served is not None
    result = sup.relaunch(RelaunchOrder(FlagChange(FITS, max_model_len=SHORT), save=True))
    assert not result.ok and "not relaunched" in result.message
    assert f"{kept} is a symbolic link to {target}" in result.message
    again = state.load("linked")
    assert again is not None and again.pid == served.pid
    assert kept.is_symlink() and target.read_bytes() == untouched
    assert sup.stop().ok
