"""`vramtop calc`: what a vLLM budget gives the KV pool and leaves the desktop.

The only place the calculator reads files (config.json, safetensors sizes, a startup log);
the arithmetic lives in `vramtop.core.headroom`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from vramtop.commands.argtypes import (
    batched_tokens,
    block_size,
    finite_float,
    model_count,
    model_len,
    positive_int,
    tensor_parallel_size,
)
from vramtop.commands.calc_inputs import CalcError, build_inputs, choose_block_size, read_log
from vramtop.commands.calc_options import CalcOptions
from vramtop.commands.catalog import summary
from vramtop.core.budget import (
    CPU_POOL_WORDS,
    GIB,
    budget_bytes,
    leaves_no_kv_block,
)
from vramtop.core.headroom.calculator import (
    largest_util_for_headroom,
    predict,
    startup_refusal,
    util_for_kv_tokens,
)
from vramtop.core.headroom.flags import relaunch_flags
from vramtop.core.headroom.from_startup import gib
from vramtop.core.headroom.model_config import ModelConfigError
from vramtop.core.headroom.terms import HeadroomError, HeadroomInputs, Prediction
from vramtop.core.vllm.log_run import LogRun
from vramtop.outcomes import ExitCode

EPILOG = """\
examples:
  vramtop calc --total-gib 79.19 --util 0.95 --util 0.90 --weights-gib 14.99 \\
      --layers 32 --kv-heads 8 --head-dim 128
  vramtop calc --from-log vllm.log --model-config config.json --util 0.85 --for-headroom-gib 3
  vramtop calc --total-gib 31.84 --util 0.93 --util 0.85 --from-log startup.log --json

A log that prints the pool ("Available KV cache memory", "KV cache size: N tokens") and its
budget is enough by itself: bytes per token come from those two numbers. Only the log's last
run is read.

Terms not given, measured or calibrated are estimated and listed as such.
"""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "calc",
        help=summary("calc"),
        description="Predict vLLM's KV pool, tokens and concurrency for one or more budgets, "
        "and the desktop headroom each leaves.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    card = parser.add_argument_group("card and budget")
    card.add_argument("--total-gib", type=finite_float, help="the GPU's total memory in GiB")
    card.add_argument(
        "--util",
        "--budget",
        dest="util",
        type=finite_float,
        action="append",
        help="a budget (vLLM's --gpu-memory-utilization) to try (repeat)",
    )
    card.add_argument(
        "--outside-budget-gib",
        type=finite_float,
        help="server memory outside its budget, e.g. the CUDA context (default: estimated)",
    )
    card.add_argument(
        "--for-headroom-gib", type=finite_float, help="largest budget leaving this much"
    )
    card.add_argument(
        "--for-kv-tokens", type=positive_int, help="smallest budget whose pool holds N tokens"
    )
    terms = parser.add_argument_group("memory terms (per GPU; a log or estimates fill the rest)")
    terms.add_argument("--weights-gib", type=finite_float)
    terms.add_argument("--non-torch-gib", type=finite_float)
    terms.add_argument("--activation-gib", type=finite_float)
    terms.add_argument("--cudagraph-gib", type=finite_float)
    terms.add_argument(
        "--model-dir", type=Path, help="checkpoint folder: weights from its safetensors sizes"
    )
    terms.add_argument("--from-log", type=Path, help="a vLLM startup log to calibrate from")
    terms.add_argument(
        "--log-util",
        type=finite_float,
        help="the budget the logged server ran with, if its log omits it",
    )
    model = parser.add_argument_group("model and vLLM settings")
    model.add_argument("--model-config", type=Path, help="the model's config.json")
    model.add_argument("--layers", type=model_count)
    model.add_argument("--kv-heads", type=model_count)
    model.add_argument("--head-dim", type=model_count)
    model.add_argument("--vocab-size", type=model_count)
    model.add_argument("--max-num-batched-tokens", type=batched_tokens, default=8192)
    model.add_argument("--dtype", help="model dtype (default: config.json's, else bfloat16)")
    model.add_argument("--kv-cache-dtype", help="default: the log's, else auto")
    model.add_argument(
        "--block-size",
        type=block_size,
        help="1, 8 or a multiple of 16 (default: the log's, else vLLM's for the device)",
    )
    model.add_argument("--max-model-len", type=model_len)
    model.add_argument(
        "--tensor-parallel-size", type=tensor_parallel_size, help="default: the log's, else 1"
    )
    model.add_argument("--enforce-eager", action="store_true")
    model.add_argument("--vllm-version", help="e.g. 0.19.1 (graph memory counts from 0.21)")
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="JSON")


def run(args: argparse.Namespace) -> int:
    options = CalcOptions.from_args(args)
    try:
        result = calculate(options)
    except (CalcError, HeadroomError, ModelConfigError) as error:
        print(f"vramtop calc: {error}", file=sys.stderr)
        return ExitCode.USAGE
    if options.json:
        print(json.dumps(result, indent=2))
    else:
        print(render_table(result))
    return 0


def calculate(options: CalcOptions) -> dict[str, Any]:
    """The JSON document: rows per util plus the inverse answers and notes."""
    log = read_log(options.from_log) if options.from_log else None
    if log is not None and log.device == "cpu":
        return cpu_result(options, log)
    inputs, notes = build_inputs(options, log)
    utils = list(options.budgets)
    for util in utils:
        if not 0 < util <= 1:
            raise CalcError(f"--util {util} is outside (0, 1]")
    if not utils and log is not None and log.util is not None:
        utils = [log.util]
    extra: dict[str, Any] = {}
    if options.for_headroom_gib is not None:
        if options.for_headroom_gib < 0:
            raise CalcError("--for-headroom-gib cannot be negative")
        util = largest_util_for_headroom(inputs, gib(options.for_headroom_gib))
        extra["for_headroom"] = {"headroom_gib": options.for_headroom_gib, "util": util or None}
        if util > 0:
            utils.append(util)
        else:
            notes.append(
                f"no budget leaves {options.for_headroom_gib:g} GiB to the desktop of a "
                f"{inputs.total_bytes / GIB:.2f} GiB card"
            )
    if options.for_kv_tokens is not None:
        if options.for_kv_tokens < 1:
            raise CalcError("--for-kv-tokens must be at least 1")
        token_util = util_for_kv_tokens(inputs, options.for_kv_tokens)
        extra["for_kv_tokens"] = {"tokens": options.for_kv_tokens, "util": token_util}
        if token_util is not None:
            utils.append(token_util)
        else:
            notes.append(f"even --util 1.0 does not hold {options.for_kv_tokens:,} tokens")
    if not utils and notes:
        raise CalcError("; ".join(notes))  # what was asked has no answer: say why
    if not utils:
        raise CalcError("give at least one --util (or --for-headroom-gib / --for-kv-tokens)")
    rows = [_checked_row(inputs, util) for util in dict.fromkeys(utils)]
    return {
        "rows": rows,
        **extra,
        "max_model_len": inputs.max_model_len,
        "architecture": inputs.architecture.kind,
        "calibrated_util": inputs.calibrated_budget,
        "device": "gpu",
        "notes": notes,
    }


def cpu_result(options: CalcOptions, log: LogRun) -> dict[str, Any]:
    """A CPU server's pool is VLLM_CPU_KVCACHE_SPACE, whatever the budget: each row is the
    pool the log reports."""
    facts = log.facts
    utils = list(options.budgets) or ([log.util] if log.util is not None else [])
    for util in utils:
        if not 0 < util <= 1:
            raise CalcError(f"--util {util} is outside (0, 1]")
    if not utils:
        raise CalcError("give at least one --util")
    if facts.kv_cache_tokens is None:
        raise CalcError(f"{options.from_log} does not print the CPU KV cache size")
    total = gib(options.total_gib) if options.total_gib is not None else None
    block_size, block_note = choose_block_size(options, log)
    tokens = facts.kv_cache_tokens
    rows: list[dict[str, Any]] = [
        {
            "util": util,
            "budget_gib": round(budget_bytes(total, util) / GIB, 4) if total else None,
            "kv_cache_gib": log.cpu_kv_gib,
            "kv_cache_tokens": tokens,
            "num_blocks": tokens // block_size,
            "max_concurrency": facts.max_concurrency,
            "desktop_headroom_gib": None,
            "estimated": [],
            "fits": True,
            "starts": True,
            "calibrated": False,
            "block_size": block_size,
        }
        for util in dict.fromkeys(utils)
    ]
    return {
        "rows": rows,
        "max_model_len": facts.max_concurrency_len or log.max_model_len,
        "architecture": None,
        "calibrated_util": None,
        "device": "cpu",
        "notes": [
            f"{CPU_POOL_WORDS}; every row is the pool the log reports",
            block_note,
        ],
    }


def _checked_row(inputs: HeadroomInputs, util: float) -> dict[str, Any]:
    """A row, with what vLLM's startup checks say of it: `refusal` (vLLM's own message) where
    it would not start, and `max_model_len_that_fits` (the remedy's round figure) where only
    the ceiling is too long for the pool."""
    out = row(predict(inputs, util))
    refused = startup_refusal(inputs, util)
    out["refusal"] = refused.message if refused is not None else None
    flags = relaunch_flags(inputs, util)
    out["max_model_len_that_fits"] = (
        flags.max_model_len if flags is not None and flags.max_model_len is not None else None
    )
    return out


def row(p: Prediction) -> dict[str, Any]:
    def g(value: int) -> float:
        return round(value / GIB, 4)

    return {
        "util": p.budget,
        "budget_gib": g(p.budget_bytes),
        "kv_cache_gib": g(p.kv_cache_bytes),
        "kv_shortfall_gib": g(p.kv_shortfall_bytes),
        "kv_cache_tokens": p.kv_cache_tokens,
        "num_blocks": p.num_blocks,
        "max_concurrency": round(p.max_concurrency, 2),
        "desktop_headroom_gib": g(p.desktop_headroom_bytes),
        "estimated": list(p.estimated),
        "fits": p.fits,
        "starts": not leaves_no_kv_block(p),
        "calibrated": p.calibrated,
        "block_size": p.block_size,
        "weights_gib": g(p.weights_bytes),
        "non_torch_gib": g(p.non_torch_bytes),
        "activation_gib": g(p.activation_bytes),
        "cudagraph_gib": g(p.cudagraph_bytes),
        "outside_budget_gib": g(p.outside_budget_bytes),
        "recurrent_state_gib_per_request": g(p.recurrent_state_bytes_per_request),
    }


def util_text(util: float) -> str:
    """A budget in two decimals, or below 0.01 in as many as it needs (0.005, 1e-320), where
    two would show 0.00, a budget vLLM refuses."""
    return f"{util:.2f}" if util >= 0.01 else f"{util:.3g}"


_COLUMNS = (
    ("util", "budget", "{}"),
    ("budget_gib", "budget GiB", "{:.2f}"),
    ("kv_cache_gib", "KV GiB", "{:.2f}"),
    ("kv_cache_tokens", "KV tokens", "{:,}"),
    ("num_blocks", "blocks", "{:,}"),
    ("max_concurrency", "concurrency", "{:.2f}x"),
    ("desktop_headroom_gib", "desktop GiB", "{:.2f}"),
)


def render_table(result: dict[str, Any]) -> str:
    header = [title for _, title, _ in _COLUMNS]
    body = [
        [
            util_text(r[key])
            if key == "util"
            else fmt.format(r[key])
            if r[key] is not None
            else "—"
            for key, _, fmt in _COLUMNS
        ]
        for r in result["rows"]
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(cell.rjust(w) for cell, w in zip(line, widths, strict=True))
        for line in [header, *body]
    ]
    if result.get("max_model_len"):
        lines.append(f"concurrency at max-model-len {result['max_model_len']:,}")
    if "for_headroom" in result and result["for_headroom"]["util"]:
        h = result["for_headroom"]
        lines.append(
            f"largest budget leaving {h['headroom_gib']} GiB to the desktop: {h['util']:.2f}"
        )
    if "for_kv_tokens" in result and result["for_kv_tokens"]["util"]:
        t = result["for_kv_tokens"]
        lines.append(f"smallest budget holding {t['tokens']:,} KV tokens: {t['util']:.2f}")
    estimated = sorted({name for r in result["rows"] for name in r["estimated"]})
    if estimated:
        first = result["rows"][0]
        parts = [f"{name} {first.get(name + '_gib', 0):.2f} GiB" for name in estimated]
        lines.append("estimated (not measured): " + ", ".join(parts))
    for r in result["rows"]:
        if r.get("kv_shortfall_gib"):
            lines.append(
                f"at {util_text(r['util'])} the budget ({r['budget_gib']:.2f} GiB) is "
                f"{r['kv_shortfall_gib']:.2f} GiB short of the weights and vLLM's other memory: "
                "no KV pool, vLLM would not start"
            )
    if any(not r["starts"] and not r.get("kv_shortfall_gib") for r in result["rows"]):
        lines.append("a row with no KV block: vLLM would not start with that budget")
    for r in result["rows"]:
        if r["kv_cache_tokens"] and not r["fits"]:
            fix = r.get("max_model_len_that_fits")
            lines.append(
                f"at {util_text(r['util'])} the pool holds less than one max-model-len request: "
                "vLLM would refuse the start" + (f"; --max-model-len {fix:,} fits" if fix else "")
            )
    lines.extend(result["notes"])
    return "\n".join(lines)
