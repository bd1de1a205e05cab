"""vLLM 0.32's `num_requests_waiting_by_reason` must not be mistaken for the waiting gauge."""

from vramtop.core.vllm.metrics import parse_metrics

PAGE = """\
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
# HELP vllm:num_requests_waiting_by_reason Number of requests waiting, by reason.
# TYPE vllm:num_requests_waiting_by_reason gauge
vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="capacity"} 2.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="deferred"} 5.0
"""


def test_waiting_by_reason_is_not_added_to_waiting() -> None:
    assert parse_metrics(PAGE).requests_waiting == 2.0
