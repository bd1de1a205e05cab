"""A start's phases read from the simulated vLLM's log, as from the real one's."""

from __future__ import annotations

from typing import Any

from vramtop.core.vllm.log_run import last_run
from vramtop.core.vllm.start_phases import parse_start_phases


def test_the_simulators_start(machine: Any, server_factory: Any) -> None:
    server = server_factory(machine, 0.93)
    assert server.wait_ready()
    phases = parse_start_phases(last_run(server.text().splitlines()))
    # The simulator prints vLLM's lines with the figures its own start took: a step's phases
    # read from them never say more seconds than the start itself lasted by its log's own
    # stamps (it printed a nominal 9.84 s of weights in a start of 4 s).
    assert phases.weights_gib is not None and phases.weights_gib > 0
    assert phases.weights_s is not None and phases.weights_gb_per_s is not None
    assert phases.graphs_s is not None and phases.engine_init_s is not None
    assert phases.to_ready_s is not None and phases.to_ready_s >= 0
    # The log's stamps are whole seconds: a phase may outlast their difference by one.
    lasted = phases.to_ready_s + 1
    assert phases.weights_s <= lasted and phases.engine_init_s <= lasted, phases
