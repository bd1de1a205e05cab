"""`vramtop calc`'s inputs: the flags, a startup log, a checkpoint folder and its config.json
turned into one `HeadroomInputs` (and the notes on what was estimated), or a `CalcError`
that says which input is missing or wrong.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

from vramtop.commands.calc_options import CalcOptions
from vramtop.core.bounds import (
    MAX_LINE_BYTES,
    MAX_SMALL_FILE_BYTES,
    budget_problem,
    whole_number,
)
from vramtop.core.budget import (
    GIB,
    outside_budget,
)
from vramtop.core.headroom.from_startup import gib, inputs_from_startup
from vramtop.core.headroom.live_inputs import MeasuredPool, pool_inputs
from vramtop.core.headroom.model_config import ModelConfigError, architecture_from_config
from vramtop.core.headroom.terms import Architecture, HeadroomInputs
from vramtop.core.json_types import JsonObject
from vramtop.core.model import StartupFacts
from vramtop.core.vllm.log_run import DEFAULT_BLOCK_SIZE, LastRun, LogRun, read_run


class CalcError(Exception):
    """Unusable input; the message is shown as is."""


def build_inputs(options: CalcOptions, log: LogRun | None) -> tuple[HeadroomInputs, list[str]]:
    notes: list[str] = []
    if options.model_dir is not None:
        model_dir_checked(options.model_dir)
    if options.log_util is not None and budget_problem(options.log_util) is not None:
        raise CalcError(f"--log-util {options.log_util:g} is outside (0, 1]: a budget, e.g. 0.9")
    sizes = {
        "total-gib": options.total_gib,
        "weights-gib": options.weights_gib,
        "non-torch-gib": options.non_torch_gib,
        "activation-gib": options.activation_gib,
        "cudagraph-gib": options.cudagraph_gib,
    }
    for flag, value in sizes.items():
        if value is not None and value < 0:
            raise CalcError(f"--{flag} cannot be negative")
    if options.outside_budget_gib is not None and options.outside_budget_gib < 0:
        raise CalcError("--outside-budget-gib cannot be negative")
    facts = log.facts if log is not None else None
    total = options.total_gib if options.total_gib is not None else None
    if total is None and facts is not None:
        total = facts.startup_total_gib
    if not total:
        raise CalcError("the card's total memory is unknown: give --total-gib")
    outside = gib(options.outside_budget_gib) if options.outside_budget_gib is not None else None
    block_size, block_note = choose_block_size(options, log)
    if log is not None:
        notes.append(block_note)
    settings: dict[str, Any] = {
        "kv_cache_dtype": options.kv_cache_dtype or (log.kv_cache_dtype if log else None) or "auto",
        "block_size": block_size,
        "max_num_batched_tokens": options.max_num_batched_tokens,
        "tensor_parallel_size": _tensor_parallel_size(options, log),
        "enforce_eager": options.enforce_eager or bool(log and log.enforce_eager),
    }
    served = options.dtype if options.dtype and options.dtype != "auto" else None
    if served is None and log is not None:
        served = log.served_dtype
    max_model_len = options.max_model_len or (log.max_model_len if log else None)
    if log is not None and not _has_model_terms(options) and log.pool_known:
        inputs = _from_pool(log, gib(total), settings, served, max_model_len, outside, options)
        notes.append(
            f"calibrated to the pool the log reports at budget {inputs.calibrated_budget}: "
            "bytes per token from its KV cache size, no model config needed"
        )
    else:
        inputs = _from_terms(
            options, log, gib(total), settings, served, max_model_len, outside, notes
        )
    note = outside_note(outside, log)
    if note:
        notes.append(note)
    overrides: dict[str, Any] = {
        "weights_bytes": _gib_or_none(options.weights_gib),
        "non_torch_bytes": _gib_or_none(options.non_torch_gib),
        "activation_bytes": _gib_or_none(options.activation_gib),
        "cudagraph_bytes": _gib_or_none(options.cudagraph_gib),
    }
    # Explicit flags override what the log measured.
    overrides = {k: v for k, v in overrides.items() if v is not None}
    return replace(inputs, **overrides), notes


def outside_note(outside: int | None, log: LogRun | None) -> str | None:
    """Where the figure for what the server holds outside its budget came from, when the
    "estimated" line alone does not say why (a log was given) or it was given."""
    if outside is not None:
        return f"outside_budget {outside / GIB:.2f} GiB (--outside-budget-gib)"
    if log is None:
        return None
    # vLLM takes its "free memory on startup" after the CUDA context exists: that figure is
    # the card less the desktop and the context together, and nothing else in the log
    # separates them.
    return (
        f"outside_budget {outside_budget(None) / GIB:.2f} GiB is estimated: a startup log does "
        "not show vLLM's CUDA context (its free memory on startup is the card less the desktop "
        "and the context together); give --outside-budget-gib with a measured one (a running "
        "server's memory less its budget)"
    )


def _has_model_terms(options: CalcOptions) -> bool:
    """Whether the flags describe the model's layers (then they, not the log's pool, do)."""
    has_config = options.model_config is not None or (
        options.model_dir is not None and (options.model_dir / "config.json").is_file()
    )
    return has_config or bool(options.layers and options.kv_heads and options.head_dim)


def _from_pool(
    log: LogRun,
    total: int,
    settings: dict[str, Any],
    served: str | None,
    max_model_len: int | None,
    outside: int | None,
    options: CalcOptions,
) -> HeadroomInputs:
    facts = log.facts
    util = log.util if log.util is not None else options.log_util
    if util is None:
        raise CalcError(
            "the log does not say its --gpu-memory-utilization: pass --log-util to read its pool"
        )
    if options.vllm_version:
        facts = replace(facts, version=options.vllm_version)
    assert facts.available_kv_gib is not None and facts.kv_cache_tokens is not None
    inputs = pool_inputs(
        MeasuredPool(
            total_bytes=total,
            budget=util,
            kv_bytes=gib(facts.available_kv_gib),
            tokens=facts.kv_cache_tokens,
            kv_cache_dtype=settings["kv_cache_dtype"],
            block_size=settings["block_size"],
            max_model_len=max_model_len or facts.max_concurrency_len or 8192,
            startup=facts if facts.weights_gib is not None else None,
            outside_budget_bytes=outside_budget(outside),
            served_dtype=served,
        )
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
    options: CalcOptions,
    log: LogRun | None,
    total: int,
    settings: dict[str, Any],
    served: str | None,
    max_model_len: int | None,
    outside: int | None,
    notes: list[str],
) -> HeadroomInputs:
    arch = _architecture(options, log)
    facts = log.facts if log is not None else None
    weights, weights_estimated = _weights(options, facts)
    if facts is not None and log is not None:
        log_util = log.util or options.log_util
        if facts.weights_gib is None:
            notes.append("the log has no weights line; weights from the flags")
            facts = replace(facts, weights_gib=weights / GIB)
        facts = replace(facts, requested_budget=log_util)
        if options.vllm_version:
            facts = replace(facts, version=options.vllm_version)
        inputs = inputs_from_startup(
            facts, total, arch, max_model_len=max_model_len, outside_budget_bytes=outside,
            **settings,
        )  # fmt: skip
        if inputs.calibrated_budget is None:
            notes.append(
                "not calibrated: the log does not say its --gpu-memory-utilization; pass --log-util"
            )
        else:
            notes.append(f"calibrated to the pool the log reports at budget {log_util}")
    else:
        inputs = HeadroomInputs(
            total_bytes=total,
            architecture=arch,
            weights_bytes=weights,
            outside_budget_bytes=outside,
            max_model_len=max_model_len or 8192,
            vllm_version=options.vllm_version,
            **settings,
        )
    return replace(
        inputs, served_dtype=served, weights_bytes=weights, weights_estimated=weights_estimated
    )


def _tensor_parallel_size(options: CalcOptions, log: LogRun | None) -> int:
    if options.tensor_parallel_size is not None:
        return int(options.tensor_parallel_size)  # below 1: the model says so
    return (log.tensor_parallel_size if log else None) or 1


def choose_block_size(options: CalcOptions, log: LogRun | None) -> tuple[int, str]:
    """The block size and where it came from, in words."""
    if options.block_size is not None:
        if options.block_size < 1:
            raise CalcError("--block-size must be at least 1")
        return options.block_size, f"block size {options.block_size} (--block-size)"
    if log is not None and log.block_size is not None:
        return log.block_size, f"block size {log.block_size} (the log's settings)"
    device = log.device if log is not None else "gpu"
    default = DEFAULT_BLOCK_SIZE.get(device, 16)
    return default, f"block size {default}: vLLM's default on {device.upper()} (not in the log)"


def _gib_or_none(value: float | None) -> int | None:
    return gib(value) if value is not None else None


def _architecture(options: CalcOptions, log: LogRun | None = None) -> Architecture:
    config: JsonObject | None = None
    path = options.model_config
    if (
        path is None
        and options.model_dir is not None
        and (options.model_dir / "config.json").is_file()
    ):
        path = options.model_dir / "config.json"
    if path is not None:
        config = _read_json(path)
        try:
            arch = architecture_from_config(config)
        except ModelConfigError as error:
            raise CalcError(f"{path}: {error}") from None
    elif options.layers and options.kv_heads and options.head_dim:
        arch = Architecture(
            full_attention_layers=options.layers,
            kv_heads=options.kv_heads,
            head_dim=options.head_dim,
        )
    else:
        why = " (the log does not print its KV pool in GiB and tokens)" if log else ""
        if options.model_dir is not None:
            why = f" (--model-dir {options.model_dir} holds no config.json)"
        raise CalcError(
            f"give --model-config config.json, or --layers, --kv-heads and --head-dim{why}"
        )
    if (options.layers is not None and options.layers < 1) or (
        options.kv_heads is not None and options.kv_heads < 1
    ):
        raise CalcError("--layers and --kv-heads must be at least 1")
    changes: dict[str, Any] = {}
    if options.vocab_size:
        changes["vocab_size"] = options.vocab_size
    if options.dtype and options.dtype != "auto":
        changes["dtype"] = options.dtype
    return replace(arch, **changes)


def _weights(options: CalcOptions, facts: StartupFacts | None) -> tuple[int, bool]:
    """(bytes per GPU, estimated?) from the flag, the log, or the checkpoint's files."""
    if options.weights_gib is not None:
        return gib(options.weights_gib), False
    if facts is not None and facts.weights_gib is not None:
        return gib(facts.weights_gib), False
    if options.model_dir is not None:
        tp = options.tensor_parallel_size if options.tensor_parallel_size is not None else 1
        return checkpoint_bytes(options.model_dir) // max(1, tp), True
    if facts is not None:
        raise CalcError("the weights are unknown (the log has no weights line): give --weights-gib")
    raise CalcError("the weights are unknown: give --weights-gib, --model-dir or --from-log")


def model_dir_checked(model_dir: Path) -> Path:
    """`--model-dir` as a folder that is there; CalcError naming the path otherwise."""
    try:
        is_dir = model_dir.is_dir()
        exists = is_dir or model_dir.exists()
    except OSError as error:  # a name too long, a folder that cannot be searched
        raise CalcError(
            f"--model-dir {model_dir} cannot be read: {error.strerror or error}"
        ) from None
    if not exists:
        raise CalcError(f"--model-dir {model_dir} does not exist: give the checkpoint's folder")
    if not is_dir:
        raise CalcError(
            f"--model-dir {model_dir} is not a folder: give the checkpoint's folder (its "
            "config.json goes to --model-config)"
        )
    return model_dir


def checkpoint_bytes(model_dir: Path) -> int:
    """A checkpoint's weight bytes: the safetensors index's total_size, else the files' sizes."""
    model_dir_checked(model_dir)
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        metadata = _read_json(index).get("metadata")
        total = whole_number(metadata.get("total_size")) if isinstance(metadata, dict) else None
        if total is not None and 0 < total < 2**50:
            return total
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise CalcError(f"{model_dir} holds no *.safetensors files; give --weights-gib")
    for path in files:
        if _is_lfs_pointer(path):
            raise CalcError(
                f"{path} is a Git LFS pointer, not the weights (the checkpoint was cloned "
                "without them): run `git lfs pull` in it, or give --weights-gib"
            )
    return sum(f.stat().st_size for f in files)


_LFS_POINTER = b"version https://git-lfs.github.com/spec/"


def _is_lfs_pointer(path: Path) -> bool:
    """A Git LFS pointer file where a weights file should be (~130 bytes of text)."""
    try:
        if path.stat().st_size > 1024:
            return False
        with path.open("rb") as f:
            return f.read(len(_LFS_POINTER)) == _LFS_POINTER
    except OSError:
        return False


def _read_json(path: Path) -> JsonObject:
    try:
        with path.open("rb") as f:  # a config or index is KBs; /dev/zero never ends
            raw = f.read(MAX_SMALL_FILE_BYTES + 1)
        if len(raw) > MAX_SMALL_FILE_BYTES:
            raise CalcError(f"{path} is larger than {MAX_SMALL_FILE_BYTES >> 20} MiB: not a config")
        data = json.loads(raw.decode("utf-8"))
    except OSError as error:
        raise CalcError(f"cannot read {path}: {error.strerror or error}") from None
    except (ValueError, RecursionError) as error:  # not JSON, not UTF-8, nested too deep
        raise CalcError(f"{path} is not JSON: {str(error)[:200]}") from None
    if not isinstance(data, dict):
        raise CalcError(f"{path} is not a JSON object")
    return data


# Of the log's last run, its startup is read: the first lines, bounded (a server that ran for
# days appended its requests after them).
RUN_LINES_KEPT = 50_000
RUN_CHARS_KEPT = 32 << 20
# What is read of a log that is not a regular file (a pipe, a device): /dev/zero never ends.
MAX_STREAM_BYTES = 256 << 20


def read_log(path: Path) -> LogRun:
    """The log's last run, read line by line in bounded memory (a line past
    `MAX_LINE_BYTES` is cut there; the rest of a run past its startup is not kept)."""
    collected = LastRun(max_lines=RUN_LINES_KEPT, max_chars=RUN_CHARS_KEPT)
    try:
        with path.open("rb") as f:
            regular = stat.S_ISREG(os.fstat(f.fileno()).st_mode)
            read = 0
            while raw := f.readline(MAX_LINE_BYTES):
                read += len(raw)
                if not regular and read > MAX_STREAM_BYTES:
                    raise CalcError(
                        f"{path}: stopped after {MAX_STREAM_BYTES >> 20} MiB without the end of "
                        "a log; give the startup log's file"
                    )
                if not raw.endswith(b"\n"):  # a line longer than any vLLM prints: cut
                    while (rest := f.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                        read += len(rest)
                        if not regular and read > MAX_STREAM_BYTES:
                            break
                for line in raw.decode("utf-8", "replace").splitlines():
                    collected.feed(line)
    except OSError as error:
        raise CalcError(f"cannot read {path}: {error.strerror or error}") from None
    run = read_run(collected.lines)
    facts = run.facts
    if facts.version is None and facts.available_kv_gib is None and facts.kv_cache_tokens is None:
        raise CalcError(f"{path} does not look like a vLLM startup log")
    return run
