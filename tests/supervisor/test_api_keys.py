"""API keys against the simulated server (real processes): a key kept in any variable reaches
the server the way vLLM reads it, never through argv; a key the server prints is masked in
everything vramtop shows, stores or records."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from sim_helpers import sim_api_servers, sim_profile

from tests.support import http
from vramtop import cli, profiles
from vramtop.core.model import ServerInfo, ServerState
from vramtop.core.secrets import MASK
from vramtop.machines.demo_world import memory_released_check
from vramtop.machines.sampler import Sampler
from vramtop.sim.gpu_probe import SimGpuProbe
from vramtop.sim.machine import SimMachine
from vramtop.supervisor import Supervisor, state

KEY = "sk-my-key-4242"


@pytest.fixture
def machine(home: Path) -> Iterator[SimMachine]:
    with SimMachine(home / "sim", speed=20.0, startup_s=0.2) as sim:
        yield sim


def _cmdlines(pids: tuple[int, ...]) -> str:
    out = []
    for pid in pids:
        try:
            out.append(" ".join(psutil.Process(pid).cmdline()))
        except psutil.Error:
            continue
    return "\n".join(out)


def test_a_key_in_any_variable_reaches_the_server_as_vllm_api_key(
    machine: SimMachine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY", KEY)
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    profile = sim_profile(machine, "keyed").model_copy(update={"api_key_env": "MY_KEY"})
    sup = Supervisor(profile, memory_released=memory_released_check(machine))
    assert sup.start().ok, sup.record()
    try:
        url = profile.url
        assert http.get(f"{url}/v1/models", timeout=5).status_code == 401
        bearer = {"Authorization": f"Bearer {KEY}"}
        assert http.get(f"{url}/v1/models", headers=bearer, timeout=5).status_code == 200
        info = sup.status()
        assert KEY not in _cmdlines(info.pids)  # never in argv, where `ps` shows it
        (server,) = sim_api_servers(machine)
        assert server.environ().get("VLLM_API_KEY") == KEY
        assert KEY not in state.state_path("keyed").read_text()
        assert KEY not in sup.log_path.read_text()
    finally:
        assert sup.stop().ok


def test_an_unset_key_variable_refuses_the_start_instead_of_serving_without_a_key(
    machine: SimMachine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MY_KEY", raising=False)
    profile = sim_profile(machine, "keyed").model_copy(update={"api_key_env": "MY_KEY"})
    sup = Supervisor(profile, memory_released=memory_released_check(machine))
    result = sup.start()
    assert not result.ok
    assert "$MY_KEY" in result.message and "not set" in result.message
    assert sim_api_servers(machine) == []
    assert sup.status().state == ServerState.STOPPED


def test_a_key_the_server_prints_is_masked_in_what_vramtop_shows_and_stores(
    machine: SimMachine, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server prints `non-default args: {'api_key': [...]}`; a budget with no KV block
    makes the start fail, so the line reaches start's output, the record and status."""
    base = sim_profile(machine, "printed", util=0.3)
    profile = base.model_copy(update={"argv": [*base.argv, "--api-key", KEY]})
    profiles.save_profile(profile)
    assert cli.main(["start", "--profile", "printed", "--timeout", "60"]) == 2
    assert cli.main(["status", "--profile", "printed"]) == 0
    assert cli.main(["status", "--profile", "printed", "--json"]) == 0
    assert cli.main(["logs", "--profile", "printed", "-n", "100"]) == 0
    shown = capsys.readouterr()
    assert f"'api_key': ['{MASK}']" in shown.out  # `logs` shows the line, masked
    assert "start failed" in shown.err
    assert KEY not in shown.out + shown.err
    stored = state.state_path("printed").read_text()
    assert KEY not in stored
    assert f"'api_key': ['{MASK}']" in "\n".join(json.loads(stored)["last_lines"])
    # The server's own log file is the server's: vramtop does not rewrite it.
    log_path = state.log_path("printed")
    assert f"'api_key': ['{KEY}']" in log_path.read_text()
    # The console's log panel shows the lines masked.
    sampler = Sampler(
        probe=SimGpuProbe(machine.socket_path),
        url=None,
        info=lambda: ServerInfo(state=ServerState.CRASHED),
        log_path=lambda: log_path,
    )
    sampler.tick()
    panel = "\n".join(sampler.log_lines())
    assert "non-default args" in panel and KEY not in panel
