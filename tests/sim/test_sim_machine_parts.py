"""The simulated machine's parts on their own: where its world listens, and its agent as a
process of its own."""

from __future__ import annotations

import os
from pathlib import Path

from vramtop.sim.agent_process import AgentProcess
from vramtop.sim.machine import SimMachine, world_socket


def test_the_worlds_socket_is_in_its_home_unless_the_path_is_too_long(tmp_path: Path) -> None:
    assert world_socket(tmp_path) == tmp_path / "gpu.sock"
    deep = tmp_path / ("d" * 120)
    far = world_socket(deep)
    assert len(str(far)) <= 100 and far != world_socket(tmp_path / ("e" * 120))
    assert SimMachine(deep).socket_path == far


def test_the_agent_runs_as_a_process_of_its_own_until_stopped() -> None:
    agent = AgentProcess(seed=1, speed=50.0)
    agent.start("http://127.0.0.1:9", dict(os.environ), concurrency=2, api_key="sk-agent")
    first = agent.process
    assert first is not None and "sk-agent" not in " ".join(map(str, first.args))
    agent.start("http://127.0.0.1:9", dict(os.environ))  # one at a time: the first ends
    assert first.returncode is not None
    second = agent.process
    agent.stop()
    assert agent.process is None and second is not None and second.returncode is not None
