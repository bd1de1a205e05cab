"""`vramtop relaunch --budget 0.85`: restart with changed flags (kept in the profile's history;
written to the profile file only with --save, once the new server serves). A start that fails
starts the previous flags again: exit 5 (`ExitCode.ROLLED_BACK`), the cause on stderr."""

from __future__ import annotations

import argparse
import logging
import re
import sys
from dataclasses import dataclass, field

from vramtop.commands import supervised
from vramtop.commands.argtypes import kv_cache_dtype, model_len
from vramtop.commands.catalog import summary
from vramtop.commands.errors import CommandError
from vramtop.commands.shared_options import Given, Target
from vramtop.core.headroom.startup_checks import round_model_len
from vramtop.core.remedy import FlagChange, RelaunchOrder, RelaunchPrecheck
from vramtop.outcomes import ActionResult, ExitCode
from vramtop.sources.probes import GpuProbe

log = logging.getLogger(__name__)


def _budget(text: str) -> float:
    """A budget (`bounds.parse_budget`): a plain number above 0, at most 1."""
    from vramtop.core.bounds import parse_budget

    value, problem = parse_budget(text)
    if value is None:
        raise argparse.ArgumentTypeError(problem or "the budget is a number such as 0.85")
    return value


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("relaunch", help=summary("relaunch"))
    supervised.add_common(p)
    p.add_argument("--budget", type=_budget, help="new --gpu-memory-utilization, e.g. 0.85")
    p.add_argument("--max-model-len", type=model_len, help="new --max-model-len")
    p.add_argument("--kv-cache-dtype", type=kv_cache_dtype, help="new --kv-cache-dtype, e.g. fp8")
    p.add_argument(
        "--save",
        action="store_true",
        help="once the new server serves, write the change into the profile's file",
    )
    p.add_argument(
        "--no-check",
        action="store_true",
        help="skip the check of the new flags against vLLM's startup checks and the memory "
        "free now (made before the running server is stopped); vLLM still checks, and a start "
        "that fails goes back to the previous flags",
    )
    supervised.add_wait_options(p)


@dataclass(frozen=True)
class RelaunchOptions:
    """`vramtop relaunch`'s options (see commands/shared_options.py)."""

    target: Target
    wait: supervised.WaitOptions
    change: FlagChange = field(default_factory=FlagChange)
    save: bool = False
    no_check: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RelaunchOptions:
        given = Given(args)
        return cls(
            target=Target.from_args(args),
            wait=supervised.WaitOptions.from_args(args),
            change=FlagChange(
                budget=given.number("budget"),
                max_model_len=given.whole("max_model_len"),
                kv_cache_dtype=given.text("kv_cache_dtype"),
            ),
            save=given.flag("save"),
            no_check=given.flag("no_check"),
        )


def _precheck(t: supervised.Supervised, options: RelaunchOptions) -> RelaunchPrecheck | None:
    """vLLM's startup checks against one reading of the machine now (the card, the desktop's
    share, the server's pool); None where the machine cannot be read: vLLM checks anyway."""
    from vramtop.core.diagnosis.desktop import DesktopWatch
    from vramtop.core.model import ServerState
    from vramtop.core.sample_facts import relaunch_refusal
    from vramtop.machines.live_machine import api_key_from
    from vramtop.machines.sampler import Sampler

    supervisor = t.supervisor
    probe: GpuProbe
    try:
        if t.demo:
            from vramtop.machines.demo_world import card_of_profile, demo_machine
            from vramtop.sim.card import DEFAULT_CARD

            card = card_of_profile(supervisor.profile.name) or DEFAULT_CARD
            probe = demo_machine(wsl=options.target.wsl, card=card).probe()
        else:
            from vramtop.sources.probes import configured_probe

            probe = configured_probe()
        sampler = Sampler(
            probe=probe,
            url=supervisor.profile.url,
            api_key=api_key_from(supervisor.profile, None),
            info=supervisor.status,
            log_path=lambda: supervisor.log_path,
            log_start=lambda: supervisor.log_offset,
        )
        try:
            sample = sampler.tick()
        finally:
            sampler.close()
    except Exception:  # a machine that cannot be read is no reason to refuse
        log.exception("reading the machine for the relaunch's check failed")
        return None
    watch = DesktopWatch()
    watch.track(sample, ServerState.RUNNING, contended=False)  # what it holds beyond its budget
    outside = watch.outside_budget
    return lambda change: relaunch_refusal(sample, change, outside)


_ESTIMATE = re.compile(r"estimated maximum model length is (\d+)")


def _hint(result: ActionResult, budget: float | None) -> None:
    """Where vLLM named the longest ceiling that fits, the command that relaunches with it."""
    found = _ESTIMATE.search(result.message)
    if found is None or budget is None:
        return
    fits = round_model_len(int(found.group(1)))
    print(
        f"vramtop: --max-model-len {fits} fits at {budget:g}: "
        f"vramtop relaunch --budget {budget:g} --max-model-len {fits}",
        file=sys.stderr,
    )


def run(args: argparse.Namespace) -> int:
    def act(options: RelaunchOptions) -> int:
        if options.change.empty:
            raise CommandError("say what to change: --budget, --max-model-len or --kv-cache-dtype")
        if options.save and options.target.demo:
            raise CommandError(
                "--save writes the change into the profile's file, and the demo's profile "
                "has none (it is made afresh each run): leave out --save"
            )
        t = supervised.target(options.target)
        precheck = None if options.no_check else _precheck(t, options)
        with supervised.said_if_left_loading(t.supervisor, demo=options.target.demo):
            order = RelaunchOrder(
                options.change, save=options.save, timeout_s=options.wait.timeout, precheck=precheck
            )
            result = t.supervisor.relaunch(
                order, progress=supervised.progress_printer(options.wait.quiet)
            )
        code = supervised.finish(result)
        if not result.ok:
            _hint(result, options.change.budget)
        # Not a plain failure: a server serves, with the flags it had before.
        return ExitCode.ROLLED_BACK if result.rolled_back else code

    return supervised.run_guarded(act, RelaunchOptions.from_args(args))
