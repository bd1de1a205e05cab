"""How an action and a command end, in values every layer may import.

Below the supervisor, the machines and the commands alike: the supervisor's actions return an
`ActionResult` that a backend hands on unchanged, and `doctor`'s checks end in an `ExitCode`
that the command returns. Nothing here imports any other module of vramtop.

The exit codes are a contract (scripts check them): 0 done; 1 failed (an unexpected error, or
the server a monitoring command started did not come up); 2 bad usage, or an action that could
not be done (the message says which); 3 and 4 `doctor`'s verdicts; 5 `relaunch`: the new flags
did not start and the previous flags serve again (a relaunch that failed and could not go back
is 2); 6 `--once`: the snapshot was printed (the GPU, the server's reason, the open findings)
but the server is not serving: down, not answering (hung or stopped), refusing vramtop's
requests (HTTP 401) or unhealthy; 130 interrupted (Ctrl+C).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum, StrEnum

# Progress of a long action, in the user's words: "stopping", "memory released", "loading",
# "profiling", "capturing graphs", "ready", "failed".
ProgressCallback = Callable[[str], None]


class Outcome(StrEnum):
    """How an action ended, as the lasting timeline, the session's `relaunch` event and the
    guard name it (`result`)."""

    OK = "ok"
    ROLLED_BACK = "rolled_back"  # a relaunch whose new flags failed: the previous serve again
    FAILED = "failed"  # it changed the server, and did not end as asked
    REFUSED = "refused"  # it did nothing to the server (refused before anything stopped)
    # The vramtop carrying it out ended half-way (killed, Ctrl+C): told by whoever settled the
    # record after it, with what was there.
    INTERRUPTED = "interrupted"

    @classmethod
    def of(cls, result: ActionResult, changed: bool) -> Outcome:
        """`result`'s outcome, for an action that `changed` the server (its launch or its
        state) or did not."""
        if result.ok:
            return cls.OK
        if result.rolled_back:
            return cls.ROLLED_BACK
        return cls.FAILED if changed else cls.REFUSED


@dataclass(frozen=True)
class ActionResult:
    ok: bool
    message: str  # one sentence for the status bar / CLI
    detail: str | None = None  # e.g. the startup failure vLLM printed
    # A relaunch whose new server did not start, and the previous flags serve again.
    rolled_back: bool = False
    # How the action ended, set once where it ends (the `Supervisor`, which tells it to every
    # listener: see `supervisor.action_events`); None for a result the supervisor did not give.
    outcome: Outcome | None = None


class ExitCode(IntEnum):
    OK = 0
    ERROR = 1  # failed: an unexpected error (traceback in the own log), a start that failed
    USAGE = 2  # bad usage, or an action refused or failed
    DERIVED_ONLY = 3  # doctor: the split can only be derived here
    NO_GPU = 4  # doctor: the GPU cannot be read
    ROLLED_BACK = 5  # relaunch: the new flags failed to start; the previous flags serve again
    NOT_SERVING = 6  # --once: the snapshot is printed, but the server is not serving
    INTERRUPTED = 130
