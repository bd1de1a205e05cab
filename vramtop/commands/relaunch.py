"""`vramtop relaunch --budget 0.85`: restart with changed flags (kept in the profile's history;
written to the profile file only with --save, once the new server serves). A start that fails
starts the previous flags again: exit 5 (`ExitCode.ROLLED_BACK`), the cause on stderr."""

from __future__ import annotations

import argparse

from vramtop.commands import supervised
from vramtop.commands.argtypes import bounded_int
from vramtop.commands.errors import CommandError, ExitCode


def _budget(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError("the budget is a fraction of the card, e.g. 0.85")
    return value


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "relaunch", help="restart with a new budget, max-model-len or KV dtype"
    )
    supervised.add_common(p)
    p.add_argument("--budget", type=_budget, help="new --gpu-memory-utilization, e.g. 0.85")
    p.add_argument("--max-model-len", type=bounded_int, help="new --max-model-len")
    p.add_argument("--kv-cache-dtype", help="new --kv-cache-dtype, e.g. fp8")
    p.add_argument(
        "--save",
        action="store_true",
        help="once the new server serves, write the change into the profile's file",
    )
    supervised.add_wait_options(p)


def run(args: argparse.Namespace) -> int:
    def act(args: argparse.Namespace) -> int:
        if args.budget is None and args.max_model_len is None and args.kv_cache_dtype is None:
            raise CommandError("say what to change: --budget, --max-model-len or --kv-cache-dtype")
        t = supervised.target(args)
        result = t.supervisor.relaunch(
            util=args.budget,
            max_model_len=args.max_model_len,
            kv_cache_dtype=args.kv_cache_dtype,
            save=args.save and not t.demo,
            progress=supervised.progress_printer(args.quiet),
            timeout_s=args.timeout,
        )
        if result.rolled_back:
            # Not a plain failure: a server serves, with the flags it had before.
            supervised.finish(result)
            return ExitCode.ROLLED_BACK
        return supervised.finish(result)

    return supervised.run_guarded(act, args)
