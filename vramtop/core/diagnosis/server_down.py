"""server_crashed, startup_out_of_memory, server_not_answering and launch_failed: vLLM is not
serving, and why. `ServerWatch` holds when each opens and closes; the `*_report` functions
what each says.

A startup out-of-memory is read from vLLM's own line ("Free memory on device … is less than
desired GPU memory utilization …"), whose numbers give the largest budget that would fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from vramtop.core.budget import largest_util_that_fits_logged
from vramtop.core.diagnosis.book import FindingBook
from vramtop.core.diagnosis.thresholds import NOT_ANSWERING_S, UNHEALTHY_SAMPLES
from vramtop.core.findings import (
    Evidence,
    Facts,
    Kind,
    Ladder,
    Remedy,
    RemedyAction,
    Report,
    RuledOut,
    Severity,
)
from vramtop.core.json_types import JsonValue
from vramtop.core.launch_failure import launch_failure
from vramtop.core.model import Sample, ServerState
from vramtop.core.vllm.log import parse_startup_oom


@dataclass(frozen=True)
class ExitFacts(Facts):
    """The server's process exited: its code as recorded (None: not known)."""

    returncode: JsonValue


@dataclass(frozen=True)
class StateFacts(Facts):
    """The sample's server state said it (`crashed`)."""

    state: str


@dataclass(frozen=True)
class HealthFacts(Facts):
    """/health failed after being healthy."""

    healthy: bool


# What showed the server down, or never started: one of these is the finding's evidence.
DownFacts = ExitFacts | StateFacts | HealthFacts


@dataclass(frozen=True)
class StartupOomFacts(Facts):
    """The numbers of vLLM's out-of-memory line (`vllm.log.parse_startup_oom`)."""

    free_gib: float
    total_gib: float
    requested_util: float  # the evidence's key (a JSON contract), as in StartupOom
    requested_gib: float


@dataclass(frozen=True)
class NotAnsweringFacts(Facts):
    not_answering_s: float


def launch_failed_report(why: str, evidence: DownFacts) -> Report:
    """What the finding says of a launch command that could not run (`why`: its words)."""
    return Report(
        severity=Severity.CRITICAL,
        summary=f"vLLM never started: the launch command could not run ({why}).",
        evidence=Evidence.of(evidence),
        ruled_out={"crash": RuledOut("the server never ran: its command could not be executed")},
        ladder=Ladder(
            observed=(why,),
            inferred=("the profile's command is not on PATH here, or not executable",),
        ),
        remedy=Remedy(
            action=RemedyAction.FIX_PROFILE,
            # The same command fails the same way, at any budget.
            restart_fails=True,
            why="make the command findable (the full path in the profile's argv, or a "
            "prelude that activates its environment), then start again; vramtop doctor "
            "checks it",
        ),
    )


def startup_oom_facts(line: str) -> dict[str, float] | None:
    """The numbers of vLLM's 'Free memory on device … is less than desired …' line."""
    oom = parse_startup_oom(line)
    return oom.as_dict() if oom is not None else None


def startup_oom_report(text: str, facts: dict[str, float]) -> Report:
    """What the finding says of the OOM line `text` and its `startup_oom_facts`."""
    util = largest_util_that_fits_logged(facts["free_gib"], facts["total_gib"])
    return Report(
        severity=Severity.CRITICAL,
        summary=(
            f"vLLM could not start: {facts['free_gib']:.2f} GiB were free but its budget "
            f"at {facts['requested_util']:.2f} needs {facts['requested_gib']:.2f} GiB."
        ),
        evidence=Evidence.of(StartupOomFacts(**facts)),
        ladder=Ladder(
            observed=(text.strip(),),
            inferred=("other programs hold more of the card than the budget leaves them",),
        ),
        remedy=Remedy(
            action=RemedyAction.RELAUNCH,
            budget=util,
            # The same budget would fail the same way: no restart is offered.
            restart_fails=True,
            why=f"{util:.2f} is the largest budget that fits the free memory; or close "
            "what holds the card and start again",
        ),
    )


def not_answering_report(seconds: float) -> Report:
    """What the finding says of a server whose process is there but answers nothing."""
    observed = f"every request has timed out for {seconds:.0f} s; its port is still held"
    return Report(
        severity=Severity.CRITICAL,
        summary=f"vLLM is not answering: no reply for {seconds:.0f} s.",
        evidence=Evidence.of(NotAnsweringFacts(round(seconds, 1))),
        ruled_out={"down": RuledOut("the connection is accepted: a process holds the port")},
        ladder=Ladder(
            observed=(observed,),
            inferred=("the server process is hung or stopped (SIGSTOP, a debugger, swap)",),
        ),
        remedy=Remedy(
            action=RemedyAction.RESTART,
            why="restart the server; requests in flight are already lost",
        ),
    )


def crash_report(why: str, evidence: DownFacts) -> Report:
    """What the finding says of a server that went down unasked (`why`, in words)."""
    return Report(
        severity=Severity.CRITICAL,
        summary=f"vLLM is down: {why}.",
        evidence=Evidence.of(evidence),
        ruled_out={"planned": RuledOut("no stop, restart or relaunch was requested")},
        ladder=Ladder(observed=(why,)),
        remedy=Remedy(
            action=RemedyAction.RESTART,
            why="start the server again and read its last log lines",
        ),
    )


class ServerWatch:
    """The rules of the three kinds that say vLLM is not serving. The `Diagnoser` feeds it the
    server's state each sample and its lifecycle events; it opens and closes in `book`."""

    def __init__(self, book: FindingBook) -> None:
        self._book = book
        self._planned_exit = False  # a stop, restart or relaunch was asked: an exit is no crash
        self.new_epoch()

    def new_epoch(self) -> None:
        """A new server start: what was seen of the last one says nothing of this one."""
        self._was_healthy = False
        self._ready_seen = False  # this start reached ready: its command did run
        self._exit_seen = False
        self._unhealthy_run = 0

    def planned(self) -> None:
        """vramtop asked the server to go (stop, restart, relaunch)."""
        self._planned_exit = True

    def ready(self, t: float) -> None:
        self._planned_exit = False
        self._ready_seen = True
        self._exit_seen = False
        self._book.close(Kind.LAUNCH_FAILED, t)
        self._book.close(Kind.STARTUP_OUT_OF_MEMORY, t)
        self._book.close(Kind.SERVER_CRASHED, t)

    def check_health(self, s: Sample, state: ServerState | None) -> None:
        if state is ServerState.CRASHED:
            # An exit event already said why (a crash, a startup failure, a planned stop).
            if not self._planned_exit and not self._exit_seen:
                error = s.info.last_error if s.info is not None else None
                why = launch_failure([error]) if error and not self._ready_seen else None
                if why is not None:
                    self._launch_failed(s.t, why, StateFacts("crashed"))
                else:
                    self._crash(s.t, "the server's state is crashed", StateFacts("crashed"))
            return
        server = s.server
        if server is None or not server.reachable or state not in (ServerState.RUNNING, None):
            return
        if server.healthy:
            self._was_healthy = True
            self._unhealthy_run = 0
            self._book.close(Kind.SERVER_CRASHED, s.t)
        elif server.healthy is False and self._was_healthy:
            self._unhealthy_run += 1
            if self._unhealthy_run >= UNHEALTHY_SAMPLES:
                self._crash(
                    s.t,
                    "/health fails after being healthy: the engine died",
                    HealthFacts(healthy=False),
                )

    def check_answering(self, s: Sample, state: ServerState | None) -> None:
        """Open while the server's process holds its port but answers nothing (hung or
        stopped); close once it answers again or is down."""
        quiet = s.server.not_answering_s if s.server is not None else None
        down = state in (ServerState.STOPPED, ServerState.STOPPING, ServerState.CRASHED)
        if quiet is not None and quiet >= NOT_ANSWERING_S and not down:
            self._book.set(Kind.SERVER_NOT_ANSWERING, s.t, not_answering_report(quiet))
        else:
            self._book.close(Kind.SERVER_NOT_ANSWERING, s.t)

    def on_exit(self, t: float, detail: Mapping[str, JsonValue]) -> None:
        self._exit_seen = True
        raw = detail.get("last_lines") or []
        if isinstance(raw, str):
            raw = [raw]
        elif not isinstance(raw, (list, tuple)):
            raw = []  # a malformed recording: no lines to read
        lines = [str(line) for line in raw]
        if any(self.check_oom_text(t, str(line)) for line in lines):
            self._planned_exit = False
            return
        if self._planned_exit:
            self._planned_exit = False
            return
        code = detail.get("returncode")
        not_launched = None if self._ready_seen else launch_failure(lines, code)
        if not_launched is not None:
            self._launch_failed(t, not_launched, ExitFacts(code))
            return
        said = f"with code {code}" if code is not None else "(exit code not known)"
        self._crash(t, f"the server exited {said} without being asked to", ExitFacts(code))

    def check_oom_text(self, t: float, text: str) -> bool:
        """Open startup_out_of_memory when `text` is vLLM's out-of-memory line."""
        facts = startup_oom_facts(text)
        if facts is None:
            return False
        self._book.set(Kind.STARTUP_OUT_OF_MEMORY, t, startup_oom_report(text, facts))
        return True

    def _launch_failed(self, t: float, why: str, evidence: DownFacts) -> None:
        self._book.set(Kind.LAUNCH_FAILED, t, launch_failed_report(why, evidence))

    def _crash(self, t: float, why: str, evidence: DownFacts) -> None:
        for kind in (Kind.VRAM_CONTENTION, Kind.KV_PRESSURE):
            self._book.close(kind, t)
        self._book.set(Kind.SERVER_CRASHED, t, crash_report(why, evidence))
