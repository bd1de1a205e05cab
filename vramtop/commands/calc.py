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

from vramtop.commands.argtypes import bounded_int, finite_float
from vramtop.commands.errors import ExitCode
from vramtop.core.budget import (
    CPU_POOL_WORDS,
    GIB,
    budget_bytes,
    leaves_no_kv_block,
    outside_budget,
)
from vramtop.core.headroom.from_startup import gib, inputs_from_startup
from vramtop.core.headroom.live import pool_inputs
from vramtop.core.headroom.model import largest_util_for_headroom, predict, util_for_kv_tokens
from vramtop.core.headroom.model_config import ModelConfigError, architecture_from_config
from vramtop.core.headroom.terms import Architecture, HeadroomError, HeadroomInputs, Prediction
from vramtop.core.model import StartupFacts
from vramtop.core.vllm.log_run import DEFAULT_BLOCK_SIZE, LogRun, read_run

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
    card.add_argument("--total-gib", type=finite_float, help="the GPU's total memory in GiB")
    card.add_argument(
        "--util",
        type=finite_float,
        action="append",
        help="a --gpu-memory-utilization to try (repeat)",
    )
    card.add_argument(
        "--outside-budget-gib",
        type=finite_float,
        help="server memory outside its budget, e.g. the CUDA context (default: estimated)",
    )
    card.add_argument(
        "--for-headroom-gib", type=finite_float, help="largest util leaving this much"
    )
    card.add_argument(
        "--for-kv-tokens", type=bounded_int, help="smallest util whose pool holds N tokens"
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
        help="the util the logged server ran with, if its log omits it",
    )
    model = parser.add_argument_group("model and vLLM settings")
    model.add_argument("--model-config", type=Path, help="the model's config.json")
    model.add_argument("--layers", type=bounded_int)
    model.add_argument("--kv-heads", type=bounded_int)
    model.add_argument("--head-dim", type=bounded_int)
    model.add_argument("--vocab-size", type=bounded_int)
    model.add_argument("--max-num-batched-tokens", type=bounded_int, default=8192)
    model.add_argument("--dtype", help="model dtype (default: config.json's, else bfloat16)")
    model.add_argument("--kv-cache-dtype", help="default: the log's, else auto")
    model.add_argument(
        "--block-size", type=bounded_int, help="default: the log's, else vLLM's for the device"
    )
    model.add_argument("--max-model-len", type=bounded_int)
    model.add_argument(
        "--tensor-parallel-size", type=bounded_int, help="default: the log's, else 1"
    )
    model.add_argument("--enforce-eager", action="store_true")
    model.add_argument("--vllm-version", help="e.g. 0.19.1 (graph memory counts from 0.21)")
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="JSON")


def run(args: argparse.Namespace) -> int:
    try:
        result = calculate(args)
    except (CalcError, HeadroomError, ModelConfigError) as error:
        print(f"vramtop calc: {error}", file=sys.stderr)
        return ExitCode.USAGE
    if getattr(args, "json", False):
        print(json.dumps(result, indent=2))
    else:
        print(render_table(result))
    return 0


def calculate(args: argparse.Namespace) -> dict[str, Any]:
    """The JSON document: rows per util plus the inverse answers and notes."""
    log = _read_log(args.from_log) if args.from_log else None
    if log is not None and log.device == "cpu":
        return cpu_result(args, log)
    inputs, notes = build_inputs(args, log)
    utils = list(args.util or [])
    for util in utils:
        if not 0 < util <= 1:
            raise CalcError(f"--util {util} is outside (0, 1]")
    if not utils and log is not None and log.util is not None:
        utils = [log.util]
    extra: dict[str, Any] = {}
    if args.for_headroom_gib is not None:
        if args.for_headroom_gib < 0:
            raise CalcError("--for-headroom-gib cannot be negative")
        util = largest_util_for_headroom(inputs, gib(args.for_headroom_gib))
        extra["for_headroom"] = {"headroom_gib": args.for_headroom_gib, "util": util or None}
        if util > 0:
            utils.append(util)
        else:
            notes.append(
                f"no budget leaves {args.for_headroom_gib:g} GiB to the desktop of a "
                f"{inputs.total_bytes / GIB:.2f} GiB card"
            )
    if args.for_kv_tokens is not None:
        if args.for_kv_tokens < 1:
            raise CalcError("--for-kv-tokens must be at least 1")
        token_util = util_for_kv_tokens(inputs, args.for_kv_tokens)
        extra["for_kv_tokens"] = {"tokens": args.for_kv_tokens, "util": token_util}
        if token_util is not None:
            utils.append(token_util)
        else:
            notes.append(f"even --util 1.0 does not hold {args.for_kv_tokens:,} tokens")
    if not utils and notes:
        raise CalcError("; ".join(notes))  # what was asked has no answer: say why
    if not utils:
        raise CalcError("give at least one --util (or --for-headroom-gib / --for-kv-tokens)")
    rows = [row(predict(inputs, util)) for util in dict.fromkeys(utils)]
    return {
        "rows": rows,
        **extra,
        "max_model_len": inputs.max_model_len,
        "architecture": inputs.architecture.kind,
        "calibrated_util": inputs.calibrated_util,
        "device": "gpu",
        "notes": notes,
    }


def cpu_result(args: argparse.Namespace, log: LogRun) -> dict[str, Any]:
    """A CPU server's pool is VLLM_CPU_KVCACHE_SPACE, whatever the budget: each row is the
    pool the log reports."""
    facts = log.facts
    utils = list(args.util or []) or ([log.util] if log.util is not None else [])
    for util in utils:
        if not 0 < util <= 1:
            raise CalcError(f"--util {util} is outside (0, 1]")
    if not utils:
        raise CalcError("give at least one --util")
    if facts.kv_cache_tokens is None:
        raise CalcError(f"{args.from_log} does not print the CPU KV cache size")
    total = gib(args.total_gib) if args.total_gib is not None else None
    block_size, block_note = _block_size(args, log)
    tokens = facts.kv_cache_tokens
    rows = [
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


def build_inputs(args: argparse.Namespace, log: LogRun | None) -> tuple[HeadroomInputs, list[str]]:
    notes: list[str] = []
    for flag in ("total_gib", "weights_gib", "non_torch_gib", "activation_gib", "cudagraph_gib"):
        value = getattr(args, flag)
        if value is not None and value < 0:
            raise CalcError(f"--{flag.replace('_', '-')} cannot be negative")
    if args.outside_budget_gib is not None and args.outside_budget_gib < 0:
        raise CalcError("--outside-budget-gib cannot be negative")
    facts = log.facts if log is not None else None
    total = args.total_gib if args.total_gib is not None else None
    if total is None and facts is not None:
        total = facts.startup_total_gib
    if not total:
        raise CalcError("the card's total memory is unknown: give --total-gib")
    outside = gib(args.outside_budget_gib) if args.outside_budget_gib is not None else None
    block_size, block_note = _block_size(args, log)
    if log is not None:
        notes.append(block_note)
    settings: dict[str, Any] = {
        "kv_cache_dtype": args.kv_cache_dtype or (log.kv_cache_dtype if log else None) or "auto",
        "block_size": block_size,
        "max_num_batched_tokens": args.max_num_batched_tokens,
        "tensor_parallel_size": _tensor_parallel_size(args, log),
        "enforce_eager": args.enforce_eager or bool(log and log.enforce_eager),
    }
    served = args.dtype if args.dtype and args.dtype != "auto" else None
    if served is None and log is not None:
        served = log.served_dtype
    max_model_len = args.max_model_len or (log.max_model_len if log else None)
    if log is not None and not _has_model_terms(args) and log.pool_known:
        inputs = _from_pool(log, gib(total), settings, served, max_model_len, outside, args)
        notes.append(
            f"calibrated to the pool the log reports at util {inputs.calibrated_util}: bytes per "
            "token from its KV cache size, no model config needed"
        )
    else:
        inputs = _from_terms(args, log, gib(total), settings, served, max_model_len, outside, notes)
    overrides: dict[str, Any] = {
        "weights_bytes": _gib_or_none(args.weights_gib),
        "non_torch_bytes": _gib_or_none(args.non_torch_gib),
        "activation_bytes": _gib_or_none(args.activation_gib),
        "cudagraph_bytes": _gib_or_none(args.cudagraph_gib),
    }
    # Explicit flags override what the log measured.
    overrides = {k: v for k, v in overrides.items() if v is not None}
    return replace(inputs, **overrides), notes


def _has_model_terms(args: argparse.Namespace) -> bool:
    """Whether the flags describe the model's layers (then they, not the log's pool, do)."""
    has_config = args.model_config is not None or (
        args.model_dir is not None and (args.model_dir / "config.json").is_file()
    )
    return has_config or bool(args.layers and args.kv_heads and args.head_dim)


def _from_pool(
    log: LogRun,
    total: int,
    settings: dict[str, Any],
    served: str | None,
    max_model_len: int | None,
    outside: int | None,
    args: argparse.Namespace,
) -> HeadroomInputs:
    facts = log.facts
    util = log.util if log.util is not None else args.log_util
    if util is None:
        raise CalcError(
            "the log does not say its --gpu-memory-utilization: pass --log-util to read its pool"
        )
    if args.vllm_version:
        facts = replace(facts, version=args.vllm_version)
    assert facts.available_kv_gib is not None and facts.kv_cache_tokens is not None
    inputs = pool_inputs(
        total,
        util,
        gib(facts.available_kv_gib),
        facts.kv_cache_tokens,
        settings["kv_cache_dtype"],
        settings["block_size"],
        max_model_len or facts.max_concurrency_len or 8192,
        facts if facts.weights_gib is not None else None,
        outside_budget(outside),
        served_dtype=served,
    )
    if outside is None:
        inputs = replace(inputs, outside_budget_bytes=None)  # listed as estimated
    return replace(
        inputs,
        max_num_batched_tokens=settings["max_num_batched_tokens"],
        tensor_parallel_size=settings["tensor_parallel_size"],
        enforce_eager=settings["enforce_eager"],
    )


def _from_terms(
    args: argparse.Namespace,
    log: LogRun | None,
    total: int,
    settings: dict[str, Any],
    served: str | None,
    max_model_len: int | None,
    outside: int | None,
    notes: list[str],
) -> HeadroomInputs:
    arch = _architecture(args, log)
    facts = log.facts if log is not None else None
    weights, weights_estimated = _weights(args, facts)
    if facts is not None and log is not None:
        log_util = log.util or args.log_util
        if facts.weights_gib is None:
            notes.append("the log has no weights line; weights from the flags")
            facts = replace(facts, weights_gib=weights / GIB)
        facts = replace(facts, requested_util=log_util)
        if args.vllm_version:
            facts = replace(facts, version=args.vllm_version)
        inputs = inputs_from_startup(
            facts, total, arch, max_model_len=max_model_len, outside_budget_bytes=outside,
            **settings,
        )  # fmt: skip
        if inputs.calibrated_util is None:
            notes.append(
                "not calibrated: the log does not say its --gpu-memory-utilization; pass --log-util"
            )
        else:
            notes.append(f"calibrated to the pool the log reports at util {log_util}")
    else:
        inputs = HeadroomInputs(
            total_bytes=total,
            architecture=arch,
            weights_bytes=weights,
            outside_budget_bytes=outside,
            max_model_len=max_model_len or 8192,
            vllm_version=args.vllm_version,
            **settings,
        )
    return replace(
        inputs, served_dtype=served, weights_bytes=weights, weights_estimated=weights_estimated
    )


def _tensor_parallel_size(args: argparse.Namespace, log: LogRun | None) -> int:
    if args.tensor_parallel_size is not None:
        return int(args.tensor_parallel_size)  # below 1: the model says so
    return (log.tensor_parallel_size if log else None) or 1


def _block_size(args: argparse.Namespace, log: LogRun | None) -> tuple[int, str]:
    """The block size and where it came from, in words."""
    if args.block_size is not None:
        if args.block_size < 1:
            raise CalcError("--block-size must be at least 1")
        return args.block_size, f"block size {args.block_size} (--block-size)"
    if log is not None and log.block_size is not None:
        return log.block_size, f"block size {log.block_size} (the log's settings)"
    device = log.device if log is not None else "gpu"
    default = DEFAULT_BLOCK_SIZE.get(device, 16)
    return default, f"block size {default}: vLLM's default on {device.upper()} (not in the log)"


def _gib_or_none(value: float | None) -> int | None:
    return gib(value) if value is not None else None


def _architecture(args: argparse.Namespace, log: LogRun | None = None) -> Architecture:
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
        why = " (the log does not print its KV pool in GiB and tokens)" if log else ""
        raise CalcError(
            f"give --model-config config.json, or --layers, --kv-heads and --head-dim{why}"
        )
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
        tp = args.tensor_parallel_size if args.tensor_parallel_size is not None else 1
        return checkpoint_bytes(args.model_dir) // max(1, tp), True
    if facts is not None:
        raise CalcError("the weights are unknown (the log has no weights line): give --weights-gib")
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


def _read_log(path: Path) -> LogRun:
    try:
        with path.open(encoding="utf-8", errors="replace") as lines:
            run = read_run(lines.read().splitlines())
    except OSError as error:
        raise CalcError(f"cannot read {path}: {error.strerror or error}") from None
    facts = run.facts
    if facts.version is None and facts.available_kv_gib is None and facts.kv_cache_tokens is None:
        raise CalcError(f"{path} does not look like a vLLM startup log")
    return run


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
    body = [
        [fmt.format(r[key]) if r[key] is not None else "—" for key, _, fmt in _COLUMNS]
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
    if any(not r["starts"] for r in result["rows"]):
        lines.append("a row with no KV block: vLLM would not start with that budget")
    if any(r["kv_cache_tokens"] and not r["fits"] for r in result["rows"]):
        lines.append("a row whose pool holds less than one max-model-len request")
    lines.extend(result["notes"])
    return "\n".join(lines)
