"""vLLM's `serve` command line, as far as the fake server needs it.

Unknown flags are argparse errors (exit 2), duplicate flags keep the last value, and
`--config file.yaml` supplies defaults the command line overrides — as vLLM does.
"""

from __future__ import annotations

import argparse
import json

from vramtop.core.json_types import JsonValue

PROG = "vllm serve"


def _json_arg(text: str) -> JsonValue:
    try:
        value: JsonValue = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from exc
    return value


# `--max-model-len auto` (or -1): fit the ceiling to the pool (vLLM 0.29+, PR #29431).
AUTO_MAX_MODEL_LEN = -1


def _max_model_len(text: str) -> int:
    """vLLM's forms: a number, `auto` or -1, and human-readable sizes (`160k`, `1m`)."""
    lowered = text.strip().lower()
    if lowered in ("auto", "-1"):
        return AUTO_MAX_MODEL_LEN
    scale = {"k": 1000, "m": 1_000_000}.get(lowered[-1:], 1)
    if lowered[-1:] in ("k", "m"):
        lowered = lowered[:-1]
    try:
        value = round(float(lowered) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid max model len: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"max model len must be at least 1: {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Fake vLLM OpenAI-compatible server.")
    p.add_argument("model_tag", nargs="?", default=None, help="model to serve")
    p.add_argument("--model", default=None)
    p.add_argument("--config", default=None, help="YAML file of default flags")
    p.add_argument("--host", default=None)
    p.add_argument("--port", type=int, default=8000)
    # A list, as in vLLM: any of the keys is accepted.
    p.add_argument("--api-key", nargs="+", default=None)
    p.add_argument("--served-model-name", nargs="+", default=None)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.92)
    p.add_argument("--max-model-len", type=_max_model_len, default=None)
    p.add_argument("--kv-cache-dtype", default="auto")
    p.add_argument("--max-num-seqs", type=int, default=None)
    p.add_argument("--max-num-batched-tokens", type=int, default=None)
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--enforce-eager", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--enable-chunked-prefill", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--reasoning-parser", default=None)
    p.add_argument("--default-chat-template-kwargs", type=_json_arg, default=None)
    p.add_argument("--enable-auto-tool-choice", action="store_true")
    p.add_argument("--tool-call-parser", default=None)
    p.add_argument("--generation-config", default="auto")
    p.add_argument("--override-generation-config", type=_json_arg, default=None)
    p.add_argument("--dtype", default="auto")
    p.add_argument("--block-size", type=int, default=None)
    p.add_argument("--quantization", "-q", default=None)
    p.add_argument("--tokenizer", default=None)
    p.add_argument("--revision", default=None)
    p.add_argument("--download-dir", default=None)
    p.add_argument("--load-format", default="auto")
    p.add_argument("--chat-template", default=None)
    p.add_argument("--swap-space", type=float, default=None)
    p.add_argument("--cpu-offload-gb", type=float, default=0)
    p.add_argument("--disable-log-stats", action="store_true")
    p.add_argument("--disable-log-requests", action="store_true")
    p.add_argument("--enable-log-requests", action="store_true")
    p.add_argument("--disable-uvicorn-access-log", action="store_true")
    p.add_argument("--uvicorn-log-level", default="info")
    return p


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse a `vllm serve` command line (a leading `serve` is accepted and dropped)."""
    if argv[:1] == ["serve"]:
        argv = argv[1:]
    parser = build_parser()
    first = parser.parse_args(argv)
    if first.config:
        import yaml  # only for a --config file: the server's start does not wait for it

        try:
            with open(first.config, encoding="utf-8") as fh:
                data = yaml.safe_load(fh) or {}
        except (OSError, yaml.YAMLError) as exc:
            parser.error(f"cannot read --config {first.config}: {exc}")
        if not isinstance(data, dict):
            parser.error(f"--config {first.config} is not a mapping of flags")
        parser.set_defaults(**{str(k).replace("-", "_"): v for k, v in data.items()})
    args = parser.parse_args(argv)
    if args.model is None:
        args.model = args.model_tag
    if args.model is None:
        parser.error("the following arguments are required: model_tag (or --model)")
    if not 0 < args.gpu_memory_utilization <= 1:
        parser.error("--gpu-memory-utilization must be in (0, 1]")
    return args


def non_default(args: argparse.Namespace) -> dict[str, object]:
    """The `non-default args: {...}` dict vLLM prints at startup: with the keys given by
    `--api-key` in it, in plain text, as vLLM prints them (a key taken from VLLM_API_KEY is
    not an argument and is not printed)."""
    defaults = vars(build_parser().parse_args([]))
    return {k: v for k, v in vars(args).items() if k != "config" and defaults.get(k) != v}


def api_keys(args: argparse.Namespace, environ: dict[str, str]) -> frozenset[str]:
    """The keys the server accepts: `--api-key`, else the VLLM_API_KEY environment variable
    (the only two places vLLM reads one from); empty: no key asked for."""
    if args.api_key:
        return frozenset(args.api_key)
    key = environ.get("VLLM_API_KEY")
    return frozenset({key}) if key else frozenset()
