"""The headroom model against what real vLLM servers logged."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from vramtop.core.budget import GIB, MIB, desktop_headroom_bytes
from vramtop.core.headroom.calculator import (
    calibrate,
    largest_util_for_headroom,
    predict,
    request_bytes_by_length,
    util_for_kv_tokens,
)
from vramtop.core.headroom.from_startup import gib, inputs_from_startup
from vramtop.core.headroom.terms import (
    CUDAGRAPH_ESTIMATE_BYTES,
    Architecture,
    HeadroomError,
    HeadroomInputs,
)
from vramtop.core.model import StartupFacts


@dataclass(frozen=True)
class Logged:
    """One real startup: its flags, measured terms (GiB, 2 decimals) and what vLLM printed."""

    name: str
    total_gib: float
    util: float
    arch: Architecture
    tp: int
    kv_dtype: str
    weights: float
    non_torch: float
    activation: float
    max_model_len: int
    kv_gib: float
    tokens: int
    concurrency: float

    def inputs(self) -> HeadroomInputs:
        return HeadroomInputs(
            total_bytes=gib(self.total_gib),
            architecture=self.arch,
            weights_bytes=gib(self.weights),
            non_torch_bytes=gib(self.non_torch),
            activation_bytes=gib(self.activation),
            outside_budget_bytes=0,
            kv_cache_dtype=self.kv_dtype,
            max_model_len=self.max_model_len,
            tensor_parallel_size=self.tp,
            vllm_version="0.19.0",  # graph estimate not yet subtracted
        )


LLAMA_8B = Architecture(full_attention_layers=32, kv_heads=8, head_dim=128, vocab_size=128_256)
QWEN25_7B = Architecture(full_attention_layers=28, kv_heads=4, head_dim=128, vocab_size=152_064)
# gemma-2: every other layer uses a 4,096-token sliding window.
GEMMA2_9B = Architecture(
    full_attention_layers=21,
    sliding_attention_layers=21,
    sliding_window=4096,
    kv_heads=8,
    head_dim=256,
    vocab_size=256_000,
)

# fmt: off
CASES = [
    Logged("llama-bf16", 79.19, 0.95, LLAMA_8B, 1, "auto", 14.99, 0.25, 1.89, 8192,
           58.11, 476_016, 58.11),
    Logged("llama-fp8kv", 79.19, 0.95, LLAMA_8B, 1, "fp8", 14.99, 0.25, 1.89, 8192,
           58.11, 952_032, 116.21),
    # TP=2: each GPU holds 2 of the 4 KV heads of every token; vLLM prints one GPU's capacity
    # (2,390,592 = 149,412 blocks × 16 at 28 × 2 × 2 × 128 × 2 bytes per token), not × 2.
    Logged("qwen-tp2", 79.19, 0.95, QWEN25_7B, 2, "auto", 7.12, 2.06, 2.21, 8192,
           63.84, 2_390_592, 291.82),
    # Sliding layers counted in their own group: 168,880 tokens is the all-layer formula, and
    # 20.60x (not 168,880 / 8192 = 20.62x) is the window-limited per-request need.
    Logged("gemma2", 79.19, 0.95, GEMMA2_9B, 1, "auto", 17.22, 0.25, 3.65, 8192,
           54.12, 168_880, 20.60),
    Logged("llama-3090-v0", 23.58, 0.90, LLAMA_8B, 1, "auto", 14.99, 0.35, 2.07, 20_000,
           3.81, 31_232, 1.56),
]
# fmt: on
IDS = [case.name for case in CASES]
HALF_CENT = 0.005  # every GiB figure in a log is rounded to 2 decimals


def block_tokens(case: Logged) -> int:
    """One step of the printed token count: block_size tokens (16 in every case here)."""
    return 16


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_measured_terms_reproduce_the_logged_pool(case: Logged) -> None:
    p = predict(case.inputs(), case.util)
    # The four inputs and the logged pool are each rounded to ±0.005 GiB (total × util too).
    input_rounding = HALF_CENT * (case.util + 3) + HALF_CENT
    assert abs(p.kv_cache_bytes / GIB - case.kv_gib) <= 0.001 * case.kv_gib + input_rounding
    # Tokens and concurrency within about 0.1 % and one block.
    assert abs(p.kv_cache_tokens - case.tokens) <= 0.001 * case.tokens + block_tokens(case)
    assert abs(p.max_concurrency - case.concurrency) <= 0.001 * case.concurrency + 0.01
    assert p.estimated == ()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_tokens_follow_from_the_logged_pool(case: Logged) -> None:
    """Calibrated on the printed GiB alone, tokens are off by at most its rounding."""
    inputs = calibrate(case.inputs(), case.util, kv_cache_bytes=gib(case.kv_gib))
    p = predict(inputs, case.util)
    bytes_per_token = p.kv_cache_bytes / max(p.kv_cache_tokens, 1)
    rounding_tokens = HALF_CENT * GIB / bytes_per_token
    assert abs(p.kv_cache_tokens - case.tokens) <= rounding_tokens + block_tokens(case)
    assert p.calibrated


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_pool_and_tokens_together_pin_the_exact_block_count(case: Logged) -> None:
    inputs = calibrate(
        case.inputs(), case.util, kv_cache_bytes=gib(case.kv_gib), kv_cache_tokens=case.tokens
    )
    p = predict(inputs, case.util)
    assert p.kv_cache_tokens == case.tokens
    assert f"{p.max_concurrency:.2f}" == f"{case.concurrency:.2f}"
    assert f"{p.kv_cache_bytes / GIB:.2f}" == f"{case.kv_gib:.2f}"


def test_fp8_kv_doubles_tokens_for_the_same_pool() -> None:
    bf16 = predict(CASES[0].inputs(), 0.95)
    fp8 = predict(CASES[1].inputs(), 0.95)
    assert fp8.kv_cache_bytes == bf16.kv_cache_bytes
    assert fp8.num_blocks in (2 * bf16.num_blocks, 2 * bf16.num_blocks + 1)


def test_field_report_budget_cut_costs_a_quarter_of_the_pool() -> None:
    """32,607 MiB card: a 9.26 GiB pool at 0.93 is about 6.71 GiB at 0.85 (−27.5 %)."""
    arch = Architecture(full_attention_layers=16, kv_heads=4, head_dim=256)
    base = HeadroomInputs(total_bytes=32_607 * MIB, architecture=arch, weights_bytes=gib(18.85))
    inputs = calibrate(base, 0.93, kv_cache_bytes=gib(9.26))
    before, after = predict(inputs, 0.93), predict(inputs, 0.85)
    assert before.kv_cache_bytes / GIB == pytest.approx(9.26, abs=1e-6)
    assert after.kv_cache_bytes / GIB == pytest.approx(6.71, abs=0.005)
    cut = (before.kv_cache_bytes - after.kv_cache_bytes) / GIB
    assert cut == pytest.approx(2.55, abs=0.005)
    assert cut / 9.26 == pytest.approx(0.275, abs=0.001)
    # Same bytes per token: tokens shrink in proportion (to one block).
    ratio = after.kv_cache_tokens / before.kv_cache_tokens
    assert ratio == pytest.approx(after.kv_cache_bytes / before.kv_cache_bytes, abs=1e-3)
    # The desktop gets the budget difference back.
    gained = after.desktop_headroom_bytes - before.desktop_headroom_bytes
    assert gained == before.budget_bytes - after.budget_bytes


def test_estimate_mode_labels_every_estimated_term() -> None:
    inputs = HeadroomInputs(
        total_bytes=gib(79.19), architecture=LLAMA_8B, weights_bytes=gib(15), weights_estimated=True
    )
    p = predict(inputs, 0.9)
    assert set(p.estimated) == {"weights", "non_torch", "activation", "cudagraph", "outside_budget"}
    assert p.cudagraph_bytes == CUDAGRAPH_ESTIMATE_BYTES
    # Activation ≈ batched tokens × vocab × 2 bytes: Llama's 128k vocab ≈ 1.9-2.0 GiB.
    assert 1.85 < p.activation_bytes / GIB < 2.0
    assert p.non_torch_bytes == gib(0.25)
    assert predict(replace(inputs, tensor_parallel_size=2), 0.9).non_torch_bytes == gib(2.1)


@pytest.mark.parametrize(
    ("version", "eager", "subtracted"),
    [
        ("0.19.1", False, False),
        ("0.21.0", False, True),
        ("0.28.0rc1", True, False),
        (None, False, True),
    ],
)  # fmt: skip
def test_graph_memory_by_version(version: str | None, eager: bool, subtracted: bool) -> None:
    inputs = replace(CASES[0].inputs(), cudagraph_bytes=gib(0.5), vllm_version=version)
    inputs = replace(inputs, enforce_eager=eager)
    assert predict(inputs, 0.95).cudagraph_bytes == (gib(0.5) if subtracted else 0)


def test_desktop_headroom_is_what_the_budget_and_context_leave() -> None:
    total = gib(31.84)
    assert desktop_headroom_bytes(total, 0.93) == total - -(-total * 93 // 100)
    assert desktop_headroom_bytes(total, 0.85, gib(0.6)) < desktop_headroom_bytes(total, 0.85)


def test_largest_util_for_headroom_is_a_typed_two_decimal_value() -> None:
    inputs = replace(CASES[0].inputs(), total_bytes=32_607 * MIB, outside_budget_bytes=gib(0.6))
    util = largest_util_for_headroom(inputs, gib(3))
    assert util == round(util, 2)
    assert desktop_headroom_bytes(inputs.total_bytes, util, gib(0.6)) >= gib(3)
    assert desktop_headroom_bytes(inputs.total_bytes, util + 0.01, gib(0.6)) < gib(3)
    assert largest_util_for_headroom(inputs, gib(40)) == 0.0


def test_util_for_kv_tokens_is_the_smallest_budget_that_holds_them() -> None:
    inputs = CASES[0].inputs()
    util = util_for_kv_tokens(inputs, 200_000)
    assert util is not None
    assert predict(inputs, util).kv_cache_tokens >= 200_000
    assert predict(inputs, round(util - 0.01, 2)).kv_cache_tokens < 200_000
    assert util_for_kv_tokens(inputs, 10**9) is None


@pytest.mark.parametrize("util", [0.0, -0.1, 1.01])
def test_util_outside_the_range_is_refused(util: float) -> None:
    with pytest.raises(HeadroomError, match="outside"):
        predict(CASES[0].inputs(), util)


def test_negative_sizes_are_refused() -> None:
    with pytest.raises(HeadroomError, match="weights"):
        predict(replace(CASES[0].inputs(), weights_bytes=-1), 0.9)


def test_a_model_that_does_not_fit_has_no_pool_and_a_shortfall() -> None:
    inputs = replace(CASES[4].inputs(), weights_bytes=gib(30))
    p = predict(inputs, 0.9)
    assert p.kv_cache_bytes == 0 and p.num_blocks == 0 and not p.fits
    assert p.kv_shortfall_bytes > 0 and p.max_concurrency == 0
    # The shortfall is what the budget lacks: the same budget with it added has a pool of 0.
    more = predict(replace(inputs, weights_bytes=gib(30) - p.kv_shortfall_bytes), 0.9)
    assert more.kv_cache_bytes == 0 and more.kv_shortfall_bytes == 0


@settings(max_examples=examples(200), deadline=None)
@given(
    util=st.floats(min_value=5e-324, max_value=1.0, exclude_min=False),
    weights_gib=st.floats(min_value=0, max_value=200),
)
def test_a_pool_is_never_negative(util: float, weights_gib: float) -> None:
    p = predict(replace(CASES[0].inputs(), weights_bytes=gib(weights_gib)), util)
    assert p.kv_cache_bytes >= 0 and p.kv_shortfall_bytes >= 0
    assert p.kv_cache_bytes == 0 or p.kv_shortfall_bytes == 0
    assert p.kv_cache_tokens >= 0 and p.max_concurrency >= 0


def test_a_calibration_whose_terms_leave_no_pool_still_reproduces_the_log() -> None:
    """The terms a log implies may exceed the budget (an estimate too high): the calibration
    counts what they lack, so the prediction at that budget is the pool the log printed."""
    base = replace(CASES[0].inputs(), weights_bytes=gib(75))
    assert predict(base, 0.9).kv_shortfall_bytes > 0
    p = predict(calibrate(base, 0.9, kv_cache_bytes=gib(9.26), rounding_bytes=0), 0.9)
    assert f"{p.kv_cache_bytes / GIB:.2f}" == "9.26" and p.kv_shortfall_bytes == 0


def test_mla_keeps_one_latent_vector_per_token_on_every_gpu() -> None:
    """DeepSeek-V3: 61 layers × (512 + 64) latent values, no V, not split by TP."""
    arch = Architecture(full_attention_layers=61, kv_heads=128, head_dim=576, mla=True)
    for tp in (1, 8):
        inputs = HeadroomInputs(
            total_bytes=gib(140), architecture=arch, weights_bytes=gib(80),
            non_torch_bytes=0, activation_bytes=0, cudagraph_bytes=0, tensor_parallel_size=tp,
        )  # fmt: skip
        p = predict(inputs, 0.9)
        assert p.num_blocks == p.kv_cache_bytes // (16 * 61 * 576 * 2)


# Qwen3-Next-80B: 48 layers, every 4th full attention (2 KV heads × 256), the rest Gated
# DeltaNet with 16 key / 32 value heads of 128 and a 4-wide convolution.
QWEN3_NEXT = Architecture(
    full_attention_layers=12,
    kv_heads=2,
    head_dim=256,
    recurrent_layers=36,
    recurrent_conv_elements=3 * (128 * 16 * 2 + 128 * 32),
    recurrent_ssm_elements=32 * 128 * 128,
)


def hybrid_inputs(**changes: object) -> HeadroomInputs:
    base = HeadroomInputs(
        total_bytes=gib(79.19), architecture=QWEN3_NEXT, weights_bytes=gib(40),
        non_torch_bytes=gib(0.25), activation_bytes=gib(2.3), cudagraph_bytes=0,
    )  # fmt: skip
    return replace(base, **changes)  # type: ignore[arg-type]


def test_hybrid_page_size_unification() -> None:
    """State 1,097,728 B/layer; 2,048 B per attention token → block 544, state padded."""
    p = predict(hybrid_inputs(), 0.9)
    assert p.block_size == 544
    page = 544 * 2048
    # 12 full + 36 recurrent → groups of 12: 1 attention + 3 recurrent groups.
    assert p.num_blocks == p.kv_cache_bytes // page // 12
    assert p.kv_cache_tokens == p.num_blocks // 4 * 544
    # One request: 8192 tokens → 16 attention pages + one page per recurrent group.
    assert p.max_concurrency == pytest.approx(p.num_blocks / (16 + 3))
    assert p.recurrent_state_bytes_per_request == 36 * 1_097_728


def test_hybrid_costs_fewer_tokens_than_the_attention_only_formula() -> None:
    p = predict(hybrid_inputs(), 0.9)
    attention_only = p.kv_cache_bytes // (12 * 2048)
    assert p.kv_cache_tokens < attention_only


def test_fp8_kv_raises_the_hybrid_block_size() -> None:
    assert predict(hybrid_inputs(kv_cache_dtype="fp8"), 0.9).block_size == 1072


def test_inputs_from_a_0_28_log_are_all_measured() -> None:
    facts = StartupFacts(
        version="0.28.0", weights_gib=14.99, consumed_gib=15.24, activation_gib=1.89,
        cudagraph_gib=0.61, startup_total_gib=79.19, requested_budget=0.95,
        available_kv_gib=57.50, kv_cache_tokens=471_008, max_concurrency_len=8192,
    )  # fmt: skip
    inputs = inputs_from_startup(facts, None, LLAMA_8B, outside_budget_bytes=gib(0.5))
    p = predict(inputs, 0.95)
    assert p.estimated == ()
    assert p.kv_cache_tokens == 471_008
    assert p.non_torch_bytes == gib(15.24) - gib(14.99)
    assert predict(inputs, 0.90).kv_cache_bytes == pytest.approx(
        p.kv_cache_bytes - (p.budget_bytes - predict(inputs, 0.90).budget_bytes), abs=1
    )


def test_inputs_from_an_old_log_say_what_was_estimated() -> None:
    facts = StartupFacts(
        version="0.19.0", weights_gib=14.99, requested_budget=0.95, available_kv_gib=58.11,
        kv_cache_tokens=476_016, max_concurrency_len=8192,
    )  # fmt: skip
    inputs = inputs_from_startup(facts, gib(79.19), LLAMA_8B, outside_budget_bytes=0)
    p = predict(inputs, 0.95)
    assert set(p.estimated) == {"non_torch", "activation"}
    assert p.kv_cache_tokens == 476_016  # the calibration absorbs the estimates


def test_graph_memory_from_the_equivalent_util_line() -> None:
    facts = StartupFacts(
        version="0.29.0", weights_gib=18.85, startup_total_gib=31.84,
        cudagraph_equivalent_util=(0.93, 0.901),
    )  # fmt: skip
    inputs = inputs_from_startup(facts, None, LLAMA_8B)
    assert inputs.cudagraph_bytes == round(0.029 * gib(31.84))


utils = st.integers(min_value=1, max_value=100).map(lambda n: n / 100)
architectures = st.sampled_from([LLAMA_8B, QWEN25_7B, GEMMA2_9B, QWEN3_NEXT])


@settings(max_examples=examples(200), deadline=None)
@given(
    arch=architectures,
    total_gib=st.floats(min_value=8, max_value=192),
    weights_gib=st.floats(min_value=0, max_value=60),
    a=utils,
    b=utils,
    kv_dtype=st.sampled_from(["auto", "fp8"]),
    tp=st.sampled_from([1, 2, 4]),
)
def test_more_budget_never_means_fewer_tokens(
    arch: Architecture,
    total_gib: float,
    weights_gib: float,
    a: float,
    b: float,
    kv_dtype: str,
    tp: int,
) -> None:
    inputs = HeadroomInputs(
        total_bytes=gib(total_gib), architecture=arch, weights_bytes=gib(weights_gib),
        kv_cache_dtype=kv_dtype, tensor_parallel_size=tp,
    )  # fmt: skip
    low, high = sorted((a, b))
    p_low, p_high = predict(inputs, low), predict(inputs, high)
    assert p_high.kv_cache_tokens >= p_low.kv_cache_tokens
    assert p_high.max_concurrency >= p_low.max_concurrency
    assert p_high.desktop_headroom_bytes <= p_low.desktop_headroom_bytes


@settings(max_examples=examples(200), deadline=None)
@given(
    arch=architectures,
    kv_dtype=st.sampled_from(["auto", "fp8"]),
    tp=st.sampled_from([1, 2, 4]),
    per_token=st.none() | st.floats(min_value=1, max_value=1e6),
    length=st.integers(min_value=1, max_value=1_048_576),
)
def test_a_requests_memory_at_any_length_is_what_the_prediction_at_that_length_needs(
    arch: Architecture, kv_dtype: str, tp: int, per_token: float | None, length: int
) -> None:
    """The bisections over lengths (vLLM's estimated maximum model length, a remedy's
    shorter ceiling) make the layout once and ask it for many lengths: each answer is what a
    server configured with that --max-model-len needs for one request."""
    inputs = HeadroomInputs(
        total_bytes=gib(80), architecture=arch, weights_bytes=gib(10), kv_cache_dtype=kv_dtype,
        tensor_parallel_size=tp, request_bytes_per_token=per_token,
    )  # fmt: skip
    configured = predict(replace(inputs, max_model_len=length), 0.9)
    assert request_bytes_by_length(inputs)(length) == configured.request_bytes


@settings(max_examples=examples(200), deadline=None)
@given(
    arch=architectures,
    util=st.integers(min_value=50, max_value=98).map(lambda n: n / 100),
    kv_gib=st.floats(min_value=1, max_value=60).map(lambda x: round(x, 2)),
    tokens_known=st.booleans(),
)
def test_calibrated_predictions_reproduce_their_calibration_point(
    arch: Architecture, util: float, kv_gib: float, tokens_known: bool
) -> None:
    base = HeadroomInputs(total_bytes=gib(79.19), architecture=arch, weights_bytes=gib(10))
    # Real vLLM: tokens follow from the real pool; the log rounds the pool to 2 decimals.
    truth = predict(calibrate(base, util, kv_cache_bytes=gib(kv_gib), rounding_bytes=0), util)
    inputs = calibrate(
        base,
        util,
        kv_cache_bytes=gib(kv_gib),
        kv_cache_tokens=truth.kv_cache_tokens if tokens_known else None,
    )
    p = predict(inputs, util)
    assert f"{p.kv_cache_bytes / GIB:.2f}" == f"{kv_gib:.2f}"
    if tokens_known:
        assert p.kv_cache_tokens == truth.kv_cache_tokens
