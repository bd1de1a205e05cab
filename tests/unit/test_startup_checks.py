"""vLLM's startup checks in one place, and the flags a remedy needs to pass them."""

from __future__ import annotations

import re
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from vramtop.core.headroom.calculator import (
    estimated_max_model_len,
    predict,
    request_bytes,
    startup_refusal,
)
from vramtop.core.headroom.flags import (
    MIN_PROPOSED_MODEL_LEN,
    relaunch_flags,
    smallest_serving_util,
)
from vramtop.core.headroom.from_startup import gib
from vramtop.core.headroom.live_inputs import with_reported_concurrency
from vramtop.core.headroom.startup_checks import (
    FREE_MEMORY,
    MAX_MODEL_LEN,
    NO_CACHE_BLOCKS,
    round_model_len,
)
from vramtop.core.headroom.terms import Architecture, HeadroomInputs

TOTAL = gib(31.84)
# 36,864 bytes a token with an fp8 cache: the simulated 27B model of the field report.
GQA = Architecture(full_attention_layers=18, kv_heads=4, head_dim=256)
FIELD = HeadroomInputs(
    total_bytes=TOTAL,
    architecture=GQA,
    weights_bytes=gib(18.9),
    non_torch_bytes=gib(0.25),
    activation_bytes=gib(0.804),
    cudagraph_bytes=gib(0.4),
    outside_budget_bytes=gib(0.35),
    kv_cache_dtype="fp8",
    max_model_len=262_144,
)

# vLLM 0.29-0.33's words (VLLM-FACTS: "Startup checks a remedy must pass").
VLLM_MAX_SEQ_LEN = re.compile(
    r"To serve at least one request with the model's max seq len \((\d+)\), \((\d+\.\d\d) GiB "
    r"KV cache is needed, which is larger than the available KV cache memory \((\d+\.\d\d) "
    r"GiB\)\. Based on the available memory, the estimated maximum model length is (\d+)\. "
    r"Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
    r"initializing the engine\."
)


def test_the_field_reports_ceilings_fit_as_they_did() -> None:
    assert predict(FIELD, 0.93).fits  # 262,144 at 0.93: vLLM starts
    refused = startup_refusal(FIELD, 0.85)
    assert refused is not None and refused.check == MAX_MODEL_LEN
    m = VLLM_MAX_SEQ_LEN.fullmatch(refused.message)
    assert m, refused.message
    assert int(m.group(1)) == 262_144 and m.group(2) == "9.00"
    estimated = int(m.group(4))
    assert estimated == refused.estimated_max_model_len
    assert 163_840 <= estimated < 262_144
    # vLLM's estimate is the longest that fits: one token more does not.
    pool = predict(FIELD, 0.85).kv_cache_bytes
    assert request_bytes(FIELD, estimated) <= pool < request_bytes(FIELD, estimated + 16)
    assert startup_refusal(replace(FIELD, max_model_len=163_840), 0.85) is None


def test_free_memory_is_checked_as_vllm_does_requested_at_most_free() -> None:
    budget = predict(FIELD, 0.93).budget_bytes
    assert startup_refusal(FIELD, 0.93, free_bytes=budget) is None
    refused = startup_refusal(FIELD, 0.93, free_bytes=budget - 1)
    assert refused is not None and refused.check == FREE_MEMORY
    assert refused.message.startswith("Free memory on device cuda:0 (")
    assert "less than desired GPU memory utilization (0.93, 29.61 GiB)" in refused.message


def test_an_empty_pool_is_refused_first() -> None:
    refused = startup_refusal(FIELD, 0.63)  # the weights and overheads take it all
    assert refused is not None and refused.check == NO_CACHE_BLOCKS
    assert refused.message.startswith("No available memory for the cache blocks.")


def test_a_hybrid_model_is_judged_by_memory_not_by_its_printed_token_count() -> None:
    # 16 attention layers and 48 recurrent ones: vLLM prints a token count a quarter of what
    # attention alone holds, yet one long request fits (its check compares memory).
    hybrid = Architecture(
        full_attention_layers=16,
        kv_heads=4,
        head_dim=256,
        recurrent_layers=48,
        recurrent_conv_elements=8192 * 4,
        recurrent_ssm_elements=32 * 128 * 128,
    )
    inputs = replace(FIELD, architecture=hybrid, max_model_len=131_072)
    p = predict(inputs, 0.93)
    assert p.kv_cache_tokens < inputs.max_model_len  # the printed figure says "no"
    assert p.max_concurrency >= 1 and p.fits  # vLLM says yes
    assert startup_refusal(inputs, 0.93) is None


def test_a_servers_reported_concurrency_replaces_its_token_count_for_the_check() -> None:
    # A live hybrid server: its pool and token count are measured, and it reports 1.6x for
    # 262,144-token requests although 120,832 tokens print (tokens/len would say 0.46x).
    measured = Architecture(full_attention_layers=1, kv_heads=1, head_dim=41_140)
    inputs = replace(FIELD, architecture=measured, kv_cache_dtype="fp8")
    pool = predict(inputs, 0.93).kv_cache_bytes
    assert not predict(inputs, 0.93).fits
    fixed = with_reported_concurrency(inputs, 0.93, pool, 1.6)
    assert predict(fixed, 0.93).fits
    assert abs(predict(fixed, 0.93).max_concurrency - 1.6) < 0.01
    # Where the two agree, nothing changes.
    same = predict(inputs, 0.93).max_concurrency
    assert with_reported_concurrency(inputs, 0.93, pool, same) == inputs


def test_the_remedys_flags_lower_the_ceiling_to_a_round_figure_that_fits() -> None:
    flags = relaunch_flags(FIELD, 0.85)
    assert flags is not None and flags.max_model_len == 163_840
    assert flags.prediction.fits and flags.prediction.max_concurrency >= 1
    assert flags.words() == "0.85 with --max-model-len 163,840 (262,144 no longer fits)"
    kept = relaunch_flags(FIELD, 0.93)
    assert kept is not None and kept.max_model_len is None and kept.words() == "0.93"


def test_no_flags_for_a_pool_under_one_useful_request() -> None:
    assert relaunch_flags(FIELD, 0.64) is None  # no KV block
    smallest = smallest_serving_util(FIELD)
    assert smallest is not None
    flags = relaunch_flags(FIELD, smallest)
    assert flags is not None and flags.prediction.fits
    assert (flags.max_model_len or FIELD.max_model_len) >= MIN_PROPOSED_MODEL_LEN
    assert relaunch_flags(FIELD, round(smallest - 0.01, 2)) is None


@given(st.integers(min_value=1, max_value=10_000_000))
def test_round_model_len_never_rounds_up_and_keeps_most_of_it(tokens: int) -> None:
    rounded = round_model_len(tokens)
    assert 0 < rounded <= tokens
    assert rounded >= tokens // 2


@given(st.floats(min_value=0.66, max_value=1.0))
def test_every_proposed_flag_set_passes_vllms_pool_checks(util: float) -> None:
    util = round(util, 2)
    flags = relaunch_flags(FIELD, util)
    if flags is None:
        return
    inputs = replace(FIELD, max_model_len=flags.max_model_len or FIELD.max_model_len)
    assert startup_refusal(inputs, util) is None
    assert estimated_max_model_len(inputs, flags.prediction.kv_cache_bytes) == (
        inputs.max_model_len
    )
