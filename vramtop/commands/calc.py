"""`vramtop calc`: what a vLLM budget gives the KV pool and leaves the desktop.

The only place the calculator reads files (config.json, safetensors sizes, a startup log);
the arithmetic lives in `vramtop.core.headroom`.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from vramtop.core.headroom import (
    GIB,
    Architecture,
    HeadroomError,
    HeadroomInputs,
    Prediction,
    gib,
    inputs_from_startup,
    largest_util_for_headroom,
    predict,
    util_for_kv_tokens,
)
from vramtop.core.model import StartupFacts
from vramtop.core.model_config import ModelConfigError, architecture_from_config

EXIT_USAGE = 2

EPILOG = """\
examples:
  vramtop calc --total-gib 79.19 --util 0.95 --util 0.90 --weights-gib 14.99 \\
      --layers 32 --kv-heads 8 --head-dim 128
  vramtop calc --from-log vllm.log --model-config config.json --util 0.85 --for-headroom-gib 3

Terms not given, measured or calibrated are estimated and listed as such.
"""


class CalcError(Exception):
    """Unusable input; the message is shown as is."""


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "calc",
        help="what a --gpu-memory-utilization gives the KV cache and leaves the desktop",
        description="Predict vLLM's KV pool, tokens and concurrency for one or more budgets, "
        "and the desktop headroom each leaves.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    card = parser.add_argument_group("card and budget")
    card.add_argument("--total-gib", type=float, help="the GPU's total memory in GiB")
    card.add_argument(
        "--util", type=float, action="append", help="a --gpu-memory-utilization to try (repeat)"
    )
    card.add_argument(
        "--outside-budget-gib",
        type=float,
        help="server memory outside its budget, e.g. the CUDA context (default: estimated)",
    )
    card.add_argument("--for-headroom-gib", type=float, help="largest util leaving this much")
    card.add_argument("--for-kv-tokens", type=int, help="smallest util whose pool holds N tokens")
    terms = parser.add_argument_group("memory terms (per GPU; a log or estimates fill the rest)")
    terms.add_argument("--weights-gib", type=float)
    terms.add_argument("--non-torch-gib", type=float)
    terms.add_argument("--activation-gib", type=float)
    terms.add_argument("--cudagraph-gib", type=float)
    terms.add_argument(
        "--model-dir", type=Path, help="checkpoint folder: weights from its safetensors sizes"
    )
    terms.add_argument("--from-log", type=Path, help="a vLLM startup log to calibrate from")
    terms.add_argument(
        "--log-util", type=float, help="the util the logged server ran with, if its log omits it"
    )
    model = parser.add_argument_group("model and vLLM settings")
    model.add_argument("--model-config", type=Path, help="the model's config.json")
    model.add_argument("--layers", type=int)
    model.add_argument("--kv-heads", type=int)
    model.add_argument("--head-dim", type=int)
    model.add_argument("--vocab-size", type=int)
    model.add_argument("--max-num-batched-tokens", type=int, default=8192)
    model.add_argument("--dtype", help="model dtype (default: config.json's, else bfloat16)")
    model.add_argument("--kv-cache-dtype", default="auto")
    model.add_argument("--block-size", type=int, default=16)
    model.add_argument("--max-model-len", type=int)
    model.add_argument("--tensor-parallel-size", type=int, default=1)
    model.add_argument("--enforce-eager", action="store_true")
    model.add_argument("--vllm-version", help="e.g. 0.19.1 (graph memory counts from 0.21)")
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="JSON")


def run(args: argparse.Namespace) -> int:
    try:
        result = calculate(args)
    except (CalcError, HeadroomError, ModelConfigError) as error:
        print(f"vramtop calc: {error}", file=sys.stderr)
        return EXIT_USAGE
    if getattr(args, "json", False):
        print(json.dumps(result, indent=2))
    else:
        print(render_table(result))
    return 0


def calculate(args: argparse.Namespace) -> dict[str, Any]:
    """The JSON document: rows per util plus the inverse answers and notes."""
    facts = _read_log(args.from_log) if args.from_log else None
    inputs, notes = build_inputs(args, facts)
    utils = list(args.util or [])
    for util in utils:
        if not 0 < util <= 1:
            raise CalcError(f"--util {util} is outside (0, 1]")
    if not utils and facts is not None and facts.requested_util is not None:
        utils = [facts.requested_util]
    extra: dict[str, Any] = {}
    if args.for_headroom_gib is not None:
        if args.for_headroom_gib < 0:
            raise CalcError("--for-headroom-gib cannot be negative")
        util = largest_util_for_headroom(inputs, gib(args.for_headroom_gib))
        extra["for_headroom"] = {"headroom_gib": args.for_headroom_gib, "util": util or None}
        if util > 0:
            utils.append(util)
        else:
            notes.append(f"no budget leaves {args.for_headroom_gib} GiB to the desktop")
    if args.for_kv_tokens is not None:
        if args.for_kv_tokens < 1:
            raise CalcError("--for-kv-tokens must be at least 1")
        token_util = util_for_kv_tokens(inputs, args.for_kv_tokens)
        extra["for_kv_tokens"] = {"tokens": args.for_kv_tokens, "util": token_util}
        if token_util is not None:
            utils.append(token_util)
        else:
            notes.append(f"even --util 1.0 does not hold {args.for_kv_tokens:,} tokens")
    if not utils:
        raise CalcError("give at least one --util (or --for-headroom-gib / --for-kv-tokens)")
    rows = [row(predict(inputs, util)) for util in dict.fromkeys(utils)]
    return {
        "rows": rows,
        **extra,
        "max_model_len": inputs.max_model_len,
        "architecture": inputs.architecture.kind,
        "calibrated_util": inputs.calibrated_util,
        "notes": notes,
    }


def row(p: Prediction) -> dict[str, Any]:
    def g(value: int) -> float:
        return round(value / GIB, 4)

    return {
        "util": p.util,
        "budget_gib": g(p.budget_bytes),
        "kv_cache_gib": g(p.kv_cache_bytes),
        "kv_cache_tokens": p.kv_cache_tokens,
        "num_blocks": p.num_blocks,
        "max_concurrency": round(p.max_concurrency, 2),
        "desktop_headroom_gib": g(p.desktop_headroom_bytes),
        "estimated": list(p.estimated),
        "fits": p.fits,
        "calibrated": p.calibrated,
        "block_size": p.block_size,
        "weights_gib": g(p.weights_bytes),
        "non_torch_gib": g(p.non_torch_bytes),
        "activation_gib": g(p.activation_bytes),
        "cudagraph_gib": g(p.cudagraph_bytes),
        "outside_budget_gib": g(p.outside_budget_bytes),
        "recurrent_state_gib_per_request": g(p.recurrent_state_bytes_per_request),
    }


def build_inputs(
    args: argparse.Namespace, facts: StartupFacts | None
) -> tuple[HeadroomInputs, list[str]]:
    notes: list[str] = []
    for flag in ("total_gib", "weights_gib", "non_torch_gib", "activation_gib", "cudagraph_gib"):
        value = getattr(args, flag)
        if value is not None and value < 0:
            raise CalcError(f"--{flag.replace('_', '-')} cannot be negative")
    if args.outside_budget_gib is not None and args.outside_budget_gib < 0:
        raise CalcError("--outside-budget-gib cannot be negative")
    arch = _architecture(args)
    total = args.total_gib if args.total_gib is not None else None
    if total is None and facts is not None:
        total = facts.startup_total_gib
    if not total:
        raise CalcError("the card's total memory is unknown: give --total-gib")
    weights, weights_estimated = _weights(args, facts)
    outside = gib(args.outside_budget_gib) if args.outside_budget_gib is not None else None
    settings: dict[str, Any] = {
        "kv_cache_dtype": args.kv_cache_dtype,
        "block_size": args.block_size,
        "max_num_batched_tokens": args.max_num_batched_tokens,
        "tensor_parallel_size": args.tensor_parallel_size,
        "enforce_eager": args.enforce_eager,
    }
    if facts is not None:
        log_util = facts.requested_util or args.log_util
        if facts.weights_gib is None:
            notes.append("the log has no weights line; weights from the flags")
            facts = replace(facts, weights_gib=weights / GIB)
        facts = replace(facts, requested_util=log_util)
        if args.vllm_version:
            facts = replace(facts, version=args.vllm_version)
        inputs = inputs_from_startup(
            facts,
            gib(total),
            arch,
            max_model_len=args.max_model_len,
            outside_budget_bytes=outside,
            **settings,
        )
        if inputs.calibrated_util is None:
            notes.append(
                "not calibrated: the log does not say its --gpu-memory-utilization; pass --log-util"
            )
        else:
            notes.append(f"calibrated to the pool the log reports at util {log_util}")
    else:
        inputs = HeadroomInputs(
            total_bytes=gib(total),
            architecture=arch,
            weights_bytes=weights,
            outside_budget_bytes=outside,
            max_model_len=args.max_model_len or 8192,
            vllm_version=args.vllm_version,
            **settings,
        )
    overrides: dict[str, Any] = {
        "weights_bytes": weights,
        "weights_estimated": weights_estimated,
        "non_torch_bytes": _gib_or_none(args.non_torch_gib),
        "activation_bytes": _gib_or_none(args.activation_gib),
        "cudagraph_bytes": _gib_or_none(args.cudagraph_gib),
    }
    # Explicit flags override what the log measured.
    overrides = {k: v for k, v in overrides.items() if v is not None}
    return replace(inputs, **overrides), notes


def _gib_or_none(value: float | None) -> int | None:
    return gib(value) if value is not None else None


def _architecture(args: argparse.Namespace) -> Architecture:
    config: dict[str, Any] | None = None
    path = args.model_config
    if path is None and args.model_dir is not None and (args.model_dir / "config.json").is_file():
        path = args.model_dir / "config.json"
    if path is not None:
        config = _read_json(path)
        arch = architecture_from_config(config)
    elif args.layers and args.kv_heads and args.head_dim:
        arch = Architecture(
            full_attention_layers=args.layers, kv_heads=args.kv_heads, head_dim=args.head_dim
        )
    else:
        raise CalcError("give --model-config config.json, or --layers, --kv-heads and --head-dim")
    if (args.layers is not None and args.layers < 1) or (
        args.kv_heads is not None and args.kv_heads < 1
    ):
        raise CalcError("--layers and --kv-heads must be at least 1")
    changes: dict[str, Any] = {}
    if args.vocab_size:
        changes["vocab_size"] = args.vocab_size
    if args.dtype and args.dtype != "auto":
        changes["dtype"] = args.dtype
    return replace(arch, **changes)


def _weights(args: argparse.Namespace, facts: StartupFacts | None) -> tuple[int, bool]:
    """(bytes per GPU, estimated?) from the flag, the log, or the checkpoint's files."""
    if args.weights_gib is not None:
        return gib(args.weights_gib), False
    if facts is not None and facts.weights_gib is not None:
        return gib(facts.weights_gib), False
    if args.model_dir is not None:
        return checkpoint_bytes(args.model_dir) // args.tensor_parallel_size, True
    raise CalcError("the weights are unknown: give --weights-gib, --model-dir or --from-log")


def checkpoint_bytes(model_dir: Path) -> int:
    """A checkpoint's weight bytes: the safetensors index's total_size, else the files' sizes."""
    if not model_dir.is_dir():
        raise CalcError(f"{model_dir} is not a folder")
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        total = _read_json(index).get("metadata", {}).get("total_size")
        if isinstance(total, int) and total > 0:
            return total
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise CalcError(f"{model_dir} holds no *.safetensors files; give --weights-gib")
    return sum(f.stat().st_size for f in files)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise CalcError(f"cannot read {path}: {error.strerror or error}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CalcError(f"{path} is not JSON: {error}") from None
    if not isinstance(data, dict):
        raise CalcError(f"{path} is not a JSON object")
    return data


def _read_log(path: Path) -> StartupFacts:
    from vramtop.core.vllm_log import parse_startup

    try:
        with path.open(encoding="utf-8", errors="replace") as lines:
            facts = parse_startup(lines)
    except OSError as error:
        raise CalcError(f"cannot read {path}: {error.strerror or error}") from None
    if facts.version is None and facts.available_kv_gib is None and facts.kv_cache_tokens is None:
        raise CalcError(f"{path} does not look like a vLLM startup log")
    return facts


_COLUMNS = (
    ("util", "util", "{:.2f}"),
    ("budget_gib", "budget GiB", "{:.2f}"),
    ("kv_cache_gib", "KV GiB", "{:.2f}"),
    ("kv_cache_tokens", "KV tokens", "{:,}"),
    ("num_blocks", "blocks", "{:,}"),
    ("max_concurrency", "concurrency", "{:.2f}x"),
    ("desktop_headroom_gib", "desktop GiB", "{:.2f}"),
)


def render_table(result: dict[str, Any]) -> str:
    header = [title for _, title, _ in _COLUMNS]
    body = [[fmt.format(r[key]) for key, _, fmt in _COLUMNS] for r in result["rows"]]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(cell.rjust(w) for cell, w in zip(line, widths, strict=True))
        for line in [header, *body]
    ]
    lines.append(f"concurrency at max-model-len {result['max_model_len']:,}")
    if "for_headroom" in result and result["for_headroom"]["util"]:
        h = result["for_headroom"]
        lines.append(
            f"largest util leaving {h['headroom_gib']} GiB to the desktop: {h['util']:.2f}"
        )
    if "for_kv_tokens" in result and result["for_kv_tokens"]["util"]:
        t = result["for_kv_tokens"]
        lines.append(f"smallest util holding {t['tokens']:,} KV tokens: {t['util']:.2f}")
    estimated = sorted({name for r in result["rows"] for name in r["estimated"]})
    if estimated:
        first = result["rows"][0]
        parts = [f"{name} {first.get(name + '_gib', 0):.2f} GiB" for name in estimated]
        lines.append("estimated (not measured): " + ", ".join(parts))
    if any(not r["fits"] for r in result["rows"]):
        lines.append("a row with no room for one max-model-len request: vLLM would not start")
    lines.extend(result["notes"])
    return "\n".join(lines)
