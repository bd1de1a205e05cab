"""The state file and `status --json` keep vLLM's name for the budget, whatever the code calls
it: a file written before reads back, and one written now reads as before."""

from __future__ import annotations

import json

from vramtop.core.model import ServerInfo, ServerState
from vramtop.supervisor import state
from vramtop.supervisor.state import Lifecycle, ServerRecord


def test_the_state_file_names_the_budget_as_vllm_does() -> None:
    state.save(ServerRecord(profile="names", state=Lifecycle.STOPPED, budget=0.85))
    written = json.loads(state.state_path("names").read_text())
    assert written["gpu_memory_utilization"] == 0.85 and "budget" not in written
    # The keys, in the order they always had.
    assert list(written) == [
        "gpu_memory_utilization" if f == "budget" else f for f in ServerRecord.__dataclass_fields__
    ]
    rec = state.load("names")
    assert rec is not None and rec.budget == 0.85


def test_status_json_names_the_budget_as_vllm_does() -> None:
    data = ServerInfo(state=ServerState.RUNNING, budget=0.85).to_json()
    assert data["gpu_memory_utilization"] == 0.85 and "budget" not in data
    assert list(data)[9:12] == ["gpu_memory_utilization", "max_model_len", "kv_cache_dtype"]
