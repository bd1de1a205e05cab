"""Why a start failed, in vLLM's own words: its ValueError or RuntimeError line wins over a
line that only says the engine died (EngineDeadError, "Engine core initialization failed")."""

from __future__ import annotations

import pytest

from vramtop.core.vllm.log import parse_startup
from vramtop.supervisor.causes import find_cause

NO_BLOCK = (
    "ValueError: No available memory for the cache blocks. Try increasing "
    "`gpu_memory_utilization` when initializing the engine."
)
ONE_REQUEST = (
    "(EngineCore_DP0 pid=311) ERROR 11-14 08:50:08 [core.py:700] ValueError: To serve at least "
    "one request with the models's max seq len (262144), (16.00 GiB KV cache is needed, which "
    "is larger than the available KV cache memory (9.26 GiB). Based on the available memory, "
    "the estimated maximum model length is 151552. Try increasing `gpu_memory_utilization` or "
    "decreasing `max_model_len` when initializing the engine."
)
WRAPPER = (
    "(APIServer pid=7358) RuntimeError: Engine core initialization failed. See root cause "
    "above. Failed core proc(s): {}"
)
DEAD = (
    "(APIServer pid=7358) vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an "
    "issue. See stack trace (above) for the root cause."
)
TRACEBACK = "Traceback (most recent call last):"


@pytest.mark.parametrize(
    ("lines", "kind", "start"),
    [
        ([TRACEBACK, NO_BLOCK, TRACEBACK, WRAPPER], "out_of_memory", "No available memory for"),
        ([DEAD, TRACEBACK, NO_BLOCK], "out_of_memory", "No available memory for"),
        ([ONE_REQUEST, WRAPPER, DEAD], "out_of_memory", "To serve at least one request"),
        (
            ["ValueError: The model's max seq len (163840) is larger than the maximum", WRAPPER],
            "other",
            "The model's max seq len (163840)",
        ),
    ],
    ids=["no-kv-block", "engine-dead-printed-first", "one-request", "other-value-error"],
)
def test_vllms_own_line_is_the_cause(lines: list[str], kind: str, start: str) -> None:
    cause = find_cause(lines)
    assert cause is not None
    assert (cause.kind, cause.message[: len(start)]) == (kind, start)
    assert "EngineDeadError" not in cause.message and "died" not in cause.message


def test_the_startup_parser_lets_the_cause_beat_a_wrapper_printed_before_it() -> None:
    facts = parse_startup([WRAPPER, NO_BLOCK])
    assert facts.error_kind == "out_of_memory"
    assert facts.error is not None and facts.error.startswith("No available memory")
