"""The Supervisor: start, stop, restart, relaunch and adopt one profile's vLLM server, and
the housekeeping step that brings its record in line with what is really there.

The console and the headless commands both use it; it never raises for outside-world
failures (they come back as `ActionResult`s). Its parts, by concern, each an object it
holds: `handle` (the record as read, the process helpers), `following` (a load, to ready),
`actions` (what a person asks for), `door_steps` (the front door's control),
`door_process` (the door's process) and
`housekeeping` (crash settling and automatic restarts), which runs only when asked.
`status()` only reads.

Reading the log and /health lives in `readiness`; ending the tree and waiting for the GPU to
give the memory back in `stopping`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from vramtop.config import Profile
from vramtop.core.json_types import JsonObject
from vramtop.core.model import ServerInfo
from vramtop.core.remedy import RelaunchOrder
from vramtop.outcomes import ActionResult, ProgressCallback
from vramtop.supervisor import attaching, door, state
from vramtop.supervisor.action_events import (
    AUTO_RESTART,
    COMMAND,
    ActionListener,
    Launch,
    action_done,
    launch_of,
    write_action,
)
from vramtop.supervisor.actions import LOST_REQUESTS_GRACE_S, ServerActions
from vramtop.supervisor.door_process import DoorProcess
from vramtop.supervisor.door_steps import DoorControl
from vramtop.supervisor.first_served import FirstServedWatch
from vramtop.supervisor.following import READY_TIMEOUT_S, LoadFollower
from vramtop.supervisor.handle import MEMORY_RELEASE_TIMEOUT_S, ServerHandle
from vramtop.supervisor.housekeeping import AUTO_RESTART_LIMIT, Housekeeper
from vramtop.supervisor.readiness import server_url
from vramtop.supervisor.record_repair import RecordRepair
from vramtop.supervisor.relaunching import Relauncher
from vramtop.supervisor.state import ServerRecord
from vramtop.supervisor.step_phases import (
    StepClock,
    recorded_last_step,
    slow_parts_of,
    start_phases,
)
from vramtop.supervisor.stopping import MemoryReleased
from vramtop.supervisor.under_way import acting

__all__ = [
    "AUTO_RESTART_LIMIT",
    "LOST_REQUESTS_GRACE_S",
    "MEMORY_RELEASE_TIMEOUT_S",
    "READY_TIMEOUT_S",
    "MemoryReleased",
    "Supervisor",
    "server_url",
]

log = logging.getLogger(__name__)


class Supervisor:
    """One profile's server: its actions, and the housekeeping step. Composed of the
    server's record and process (`ServerHandle`), the load follower and the actions over
    both; each part keeps its own state, set in its own `__init__`."""

    def __init__(
        self,
        profile: Profile,
        *,
        memory_released: MemoryReleased | None = None,
        health_timeout_s: float = 1.0,
        options_of: attaching.ProfileOptions = attaching.profile_option,
    ) -> None:
        """`options_of`: how a command line names a profile's server (a demo's in the demo's
        words), said where another profile's server holds a port this one needs."""
        self._server = ServerHandle(
            profile,
            memory_released=memory_released,
            health_timeout_s=health_timeout_s,
            options_of=options_of,
        )
        # The one owner of the front door's control, which every part asks; the door's
        # process (started with a launch, stopped, started again) is apart.
        door_process = DoorProcess(self._server)
        self._door = DoorControl(self._server, door_process)
        self._follower = LoadFollower(self._server, self._door)
        repair = RecordRepair(self._server)  # a state file lost or wrong, set right
        self._actions = ServerActions(
            self._server, self._follower, self._door, door_process, repair
        )
        self._relauncher = Relauncher(self._actions, self._server, self._follower, self._door)
        self._housekeeper = Housekeeper(
            self._server,
            self._door,
            self._follower,
            self._actions,
            door_process,
            repair,
            step_begun=self._step_begun,
            restarted=self._auto_restarted,
        )
        # The door restarts the record counted when this supervisor last told of them (from
        # its making: one started again at its first housekeeping step is told too).
        made = self._server.recorded()
        self._door_restarts_told = made.door_restarts if made is not None else 0
        # Told of each action once it has answered, its outcome set: the lasting timeline's
        # writer first, then whoever asks (`tell_actions_to`: a console's session).
        self._listeners: list[ActionListener] = [write_action]
        # After a step's event, the first request the door serves, in an event of its own.
        self._first_served = FirstServedWatch(
            self.name, self._server.recorded, lambda: self._server.profile.front_door_hold_s
        )

    # --- the server as recorded (the handle's) ------------------------------------------

    @property
    def profile(self) -> Profile:
        return self._server.profile

    @property
    def file_profile(self) -> Profile:
        """The profile as its file says it (a relaunch not saved leaves it)."""
        return self._server.file_profile

    @property
    def name(self) -> str:
        return self._server.name

    @property
    def log_path(self) -> Path | None:
        return self._server.log_path

    @property
    def log_offset(self) -> int:
        return self._server.log_offset

    @property
    def record_note(self) -> str | None:
        """What the last housekeeping step, start or stop found of a lost state file."""
        return self._server.record_note

    def record(self) -> ServerRecord | None:
        return self._server.record()

    @property
    def scrape_url(self) -> str:
        """Where vramtop itself reads the server (/metrics, /health): the profile's URL, or
        with a front door vLLM's own loopback port behind it, so that vramtop's reads are
        never held at the door nor counted among the agent's requests."""
        if self._server.profile.front_door is None:
            return self._server.profile.url
        rec = self._server.recorded()
        port = rec.internal_port if rec is not None else None
        return door.upstream_url(port or door.kept_internal_port(self._server.name))

    @property
    def agent_url(self) -> str:
        """Where the agent (a client) sends its requests: the front door, when the profile
        has one, else the server itself."""
        address = self._server.profile.front_door
        return self._server.profile.url if address is None else door.door_url(address)

    def door_restarts_since(self) -> int:
        """How many times the front door was started again after it died since the last
        ask, or since this supervisor was made (by any vramtop: the record counts them)."""
        rec = self._server.recorded()
        count = rec.door_restarts if rec is not None else 0
        told, self._door_restarts_told = self._door_restarts_told, count
        return max(0, count - told)

    def status(self) -> ServerInfo:
        return self._server.shown.status()

    # --- what a person asks for (the actions') ------------------------------------------

    def start(
        self,
        progress: ProgressCallback | None = None,
        wait_ready: bool = True,
        timeout_s: float = READY_TIMEOUT_S,
        asked_by: str = COMMAND,
    ) -> ActionResult:
        """`asked_by` (here and in each action below): who asked, for the lasting timeline
        (`key`, `command`, `guard`)."""
        before = launch_of(self._server.recorded())
        with self._step_begun() as step, acting(self._server, "start", asked_by):
            result = self._actions.start(progress, wait_ready, timeout_s)
        return self._told("start", result, asked_by, before, self._step_facts(step))

    def stop(
        self, progress: ProgressCallback | None = None, asked_by: str = COMMAND
    ) -> ActionResult:
        before = launch_of(self._server.recorded())
        self._first_served.cancel()
        with acting(self._server, "stop", asked_by):
            result = self._actions.stop(progress)
        return self._told("stop", result, asked_by, before)

    def restart(
        self,
        progress: ProgressCallback | None = None,
        wait_ready: bool = True,
        timeout_s: float = READY_TIMEOUT_S,
        requests_lost: bool = False,
        asked_by: str = COMMAND,
    ) -> ActionResult:
        before = launch_of(self._server.recorded())
        with self._step_begun() as step, acting(self._server, "restart", asked_by):
            result = self._actions.restart(progress, wait_ready, timeout_s, requests_lost)
        return self._told("restart", result, asked_by, before, self._step_facts(step))

    def relaunch(
        self,
        order: RelaunchOrder,
        progress: ProgressCallback | None = None,
        asked_by: str = COMMAND,
    ) -> ActionResult:
        """The relaunch `order` asks (`Relauncher`), told as the other actions are."""
        before = launch_of(self._server.recorded())
        with self._step_begun() as step, acting(self._server, "relaunch", asked_by):
            result = self._relauncher.relaunch(order, progress)
        change = order.change
        # The event names all three flags, null where unchanged, as it always has.
        changed: JsonObject = {
            "gpu_memory_utilization": change.budget,
            "max_model_len": change.max_model_len,
            "kv_cache_dtype": change.kv_cache_dtype,
            **self._step_facts(step),
        }
        return self._told("relaunch", result, asked_by, before, changed)

    def _auto_restarted(self, result: ActionResult, before: Launch, step: StepClock) -> None:
        """The profile's automatic restart after a crash has answered: a `restart` event as one
        asked for has, with its phases (`step`), asked by `auto_restart`."""
        self._told("restart", result, AUTO_RESTART, before, self._step_facts(step))

    def _step_begun(self) -> AbstractContextManager[StepClock]:
        """A start, restart or relaunch begins: its moments counted from now by a clock of its
        own (an automatic restart loading meanwhile keeps its own), timed on this thread while
        the `with` runs; the look for the previous step's first request served ended (a
        release from now on is this one's)."""
        self._first_served.cancel()
        return self._server.step.timing()

    def _step_facts(self, step: StepClock) -> JsonObject:
        """A step's own facts for its event: the door's part (requests sent again, the
        drain's seconds) and its `phases`: the moments vramtop saw (held, drained, stopped,
        memory released, launched, ready) with the new start's from vLLM's log."""
        facts = dict(step.held)
        before = recorded_last_step(self.name)  # (this step's event is not written yet)
        phases = step.phases()
        if "drain_took_s" in facts:
            phases["drained_s"] = facts["drain_took_s"]
        if "drained_requests" in facts:
            phases["drained_requests"] = facts.pop("drained_requests")
        phases |= start_phases(self._server.recorded())
        if phases:
            facts["phases"] = phases
        previous = before.get("phases") if before is not None else None
        slow = slow_parts_of(self.profile, phases, previous if isinstance(previous, dict) else None)
        if slow:
            facts["slow_parts"] = slow
        return facts

    def tell_actions_to(self, listener: ActionListener) -> None:
        """Have `listener` told of each action once it has answered (after the timeline)."""
        self._listeners.append(listener)

    def _told(
        self,
        name: str,
        result: ActionResult,
        asked_by: str,
        before: Launch,
        detail: JsonObject | None = None,
    ) -> ActionResult:
        """`result` with its outcome set, the one place it is (see `action_events`), once
        every listener has been told of it; a listener that fails never changes it."""
        try:
            after = launch_of(self._server.record())
        except Exception:  # (a record that cannot be read: the action did something)
            log.exception("reading the record after the %s failed", name)
            after = None, None
        done = action_done(
            self.name, name, result, asked_by=asked_by, before=before, after=after, detail=detail
        )
        for listener in self._listeners:
            try:
                listener(done)
            except Exception:  # the action happened: a record that cannot say so is logged
                log.exception("recording the %s failed", name)
        phases = done.detail.get("phases")
        released = isinstance(phases, dict) and "ready_s" in phases  # (at ready, by the door)
        if done.changed and released and self._server.profile.front_door is not None:
            self._first_served.watch(name, done.t)
        return done.result

    def attach(
        self,
        port: int | None = None,
        pid: int | None = None,
        log: Path | None = None,
        options_of: attaching.ProfileOptions = attaching.profile_option,
    ) -> ActionResult:
        return self._actions.attach(port, pid, log, options_of)

    def wait_ready(
        self, progress: ProgressCallback | None = None, timeout_s: float = READY_TIMEOUT_S
    ) -> ActionResult:
        return self._actions.wait_ready(progress, timeout_s)

    # --- housekeeping (the housekeeper's) ------------------------------------------------

    def housekeeping(self) -> ServerInfo:
        """One step that settles the record against what is really there, then returns the
        server as it now is (see `Housekeeper.housekeeping`)."""
        return self._housekeeper.housekeeping()

    def settling(self) -> Callable[[], None] | None:
        """The step `housekeeping` would take now, or None (see `Housekeeper.settling`)."""
        return self._housekeeper.settling()

    def owns_its_port(self) -> bool:
        """Whether the profile's port is its own server's, or nobody's: False when a server
        this profile did not start (by hand, or another profile's) holds it, which watching
        the port would otherwise show under this profile's name, state and log."""
        from vramtop.supervisor import adoption

        self.housekeeping()  # a lost record is rebuilt first: then it is the profile's
        rec = self._server.recorded()
        if rec is not None and rec.state in state.ALIVE and self._server.alive(rec):
            return True
        host, port = door.vllm_address(self._server.profile)  # behind its door, if any
        found = adoption.rebuilt_record(self._server.name, host, port)
        return not isinstance(found, str)
