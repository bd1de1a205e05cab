"""What the server's log says about how far it got and why it stopped.

The log's facts (the phase a line announces, vLLM's start-failed line) are read by
`vramtop.core.vllm.log`; the budget that fits by `vramtop.core.budget`. This module only turns
them into the supervisor's one-sentence cause, with a few markers of its own for failures the
parser does not classify.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vramtop.core.budget import largest_util_that_fits_logged
from vramtop.core.launch_failure import launch_failure
from vramtop.core.vllm.log import Phase, detect_phase, parse_startup_oom, startup_failure

READY = Phase.READY

_ENGINE_DEAD = re.compile(r"EngineDeadError|Engine core .*died|EngineCore .*failed", re.I)
_ERROR = re.compile(r"(?:^|\s)(?:\w+Error|\w+Exception): .+|Traceback \(most recent call last\)")


def phase_of(line: str) -> Phase | None:
    """The startup phase a log line shows (a failure is not a phase here: the exit says it)."""
    phase = detect_phase(line)
    return None if phase is Phase.FAILED else phase


@dataclass(frozen=True)
class Cause:
    kind: str  # "out_of_memory", "engine_dead", "launch_failed", "other"
    message: str  # one sentence for the user
    line: str  # the log line it came from
    largest_fitting_budget: float | None = None


def find_cause(lines: list[str], returncode: int | None = None) -> Cause | None:
    """The recognised reason a start failed or a server died, from its last log lines (the
    last run's: the newest start-failed line wins) and its exit code where known. A launch
    command that could not run at all (the shell's `exec: vllm: not found`, exit 127) comes
    first: nothing after it is vLLM's."""
    not_launched = launch_failure(lines[-3:], returncode)
    if not_launched is not None:
        return Cause(
            "launch_failed", f"the launch command could not run: {not_launched}", not_launched
        )
    for line in reversed(lines):
        oom = parse_startup_oom(line)
        if oom is not None:
            fits = largest_util_that_fits_logged(oom.free_gib, oom.total_gib)
            return Cause(
                "out_of_memory",
                f"out of memory at startup: budget {oom.requested_util:.2f} needs "
                f"{oom.requested_gib:.2f} GiB but only {oom.free_gib:.2f} of "
                f"{oom.total_gib:.2f} GiB were free; the largest budget that fits now "
                f"is {fits:.2f}",
                line.strip(),
                fits,
            )
    told = _told_cause(lines)
    if told is not None:
        return told
    for line in lines:
        if _ENGINE_DEAD.search(line):
            return Cause("engine_dead", "the engine died (EngineDeadError)", line.strip())
    errors = [line for line in lines if _ERROR.search(line) and "Traceback" not in line]
    if errors:
        return Cause("other", errors[-1].strip()[-300:], errors[-1].strip())
    return None


def _told_cause(lines: list[str]) -> Cause | None:
    """vLLM's own words for why it stopped ("No available memory for the cache blocks", "To
    serve at least one request with the model's max seq len …", a ValueError's or a
    RuntimeError's message), which beat a wrapper that only names the engine's death
    (EngineDeadError, "Engine core initialization failed"): an out-of-memory line first,
    the newest of each kind."""
    told: dict[str, tuple[str, str]] = {}
    for line in lines:
        found = startup_failure(line)
        if found is not None and found[0] != "engine_dead":
            told[found[0]] = (found[1], line.strip())
    for kind in ("out_of_memory", "other"):
        if kind in told:
            message, line = told[kind]
            return Cause(kind, message, line)
    return None
