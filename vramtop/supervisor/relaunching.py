"""A relaunch: stop the server, start it with changed flags, and start the previous flags
again when the new start fails.

It holds the profile's lock while it stops and launches, as every action does
(`actions`); the change goes into the profile's history (and its file, when saved) once the
new server serves.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from vramtop.config import Profile
from vramtop.core.remedy import FlagChange, RelaunchOrder
from vramtop.core.vllm import args as vllm_args
from vramtop.outcomes import ActionResult, ProgressCallback
from vramtop.supervisor import state
from vramtop.supervisor.actions import Loading, ServerActions
from vramtop.supervisor.door_steps import DoorControl
from vramtop.supervisor.following import READY_TIMEOUT_S, LoadFollower
from vramtop.supervisor.handle import ServerHandle, no_progress
from vramtop.supervisor.state import Lifecycle

log = logging.getLogger(__name__)

Command = tuple[list[str], str | None, dict[str, str] | None]


@dataclass
class _Relaunch:
    """A relaunch's stop and new start, done under the lock; what a roll-back needs."""

    change: FlagChange
    started: ActionResult | Loading
    launch_id: str | None  # the new start's (its record's)
    previous: Command | None  # the command of the server that served before (None: none did)
    previous_overrides: dict[str, str]


class Relauncher:
    """A relaunch asked of the server (`server`): its stop and start are the actions'
    (`actions`), its load is handed to `follower` once the lock is released."""

    def __init__(
        self,
        actions: ServerActions,
        server: ServerHandle,
        follower: LoadFollower,
        door_control: DoorControl,
    ) -> None:
        self._actions = actions
        self._server = server
        self._follower = follower
        self._door = door_control

    def relaunch(
        self, order: RelaunchOrder, progress: ProgressCallback | None = None
    ) -> ActionResult:
        """Stop, then start with changed flags (`order.change`); the change goes into the
        profile's history (and into its file only when `order.save`) once the new server
        serves.

        A start that fails starts the previous server's command again (`rolled_back`), so
        a relaunch never leaves a server that served down, and its flags do not stick.
        `order.precheck` is asked with the change under the lock, before the stop: a sentence
        it returns refuses the relaunch (the old server keeps serving)."""
        change, save, wait_ready = order.change, order.save, order.wait_ready
        timeout_s = READY_TIMEOUT_S if order.timeout_s is None else order.timeout_s
        if change.empty:
            return ActionResult(
                False, "nothing to change: give a budget, max-model-len or KV dtype"
            )
        if save and not wait_ready:
            return ActionResult(
                False, "a relaunch is saved once its server serves: wait for it to save it"
            )
        report = progress or no_progress
        self._server.fresh_profile()
        before = self._server.profile
        unsavable = _unsavable(before) if save else None
        if unsavable is not None:  # refused before the stop: the server keeps serving
            return ActionResult(False, f"not relaunched, since it could not be saved: {unsavable}")
        outcome = self._server.locked(lambda: self._relaunch_launch(order, report))
        if isinstance(outcome, ActionResult):
            return outcome  # refused, or the stop failed: nothing new was started
        started = outcome.started
        result = (
            self._follower.follow(started.rec, report, timeout_s)
            if isinstance(started, Loading)
            else started
        )
        if result.ok:
            if not wait_ready:
                return result  # loading: the profile changes once it serves
            self._server.profile = before.relaunched(change.argv_changes(), datetime.now(UTC))
            return self._saved(result, before) if save else result
        if not self._start_failed_here(outcome, started):
            return result  # still loading, or another vramtop stopped or replaced it
        back = self._roll_back(outcome, result, report, timeout_s)
        if not back.rolled_back:  # (rolled back: the door was released to it at its ready)
            self._door.after_action(back)
        return back

    def _relaunch_launch(
        self, order: RelaunchOrder, report: ProgressCallback
    ) -> ActionResult | _Relaunch:
        """Under the lock: the old server's command, the precheck, the stop, the new start."""
        change, precheck = order.change, order.precheck
        rec = self._server.record()
        old_overrides = dict(rec.flag_overrides) if rec is not None else {}
        serving = rec is not None and rec.state == Lifecycle.RUNNING and self._server.alive(rec)
        previous = self._server.command_for_restart() or self._server.profile_command(old_overrides)
        argv, cwd, env = previous
        command = (change.applied_to(argv), cwd, env)
        overrides = {**old_overrides, **change.argv_changes()}
        refused = self._actions.refuse_without_key(env)
        if refused is not None:
            return refused  # before the stop: the running server stays
        if precheck is not None:
            try:
                said = precheck(change)
            except Exception as exc:  # a check that breaks refuses: the server keeps serving
                log.exception("the relaunch's precheck failed")
                said = f"could not check the relaunch first ({exc}); nothing was changed"
            if said is not None:
                return ActionResult(False, said)  # before the stop: the running server stays
        unheld = self._door.hold_before_stop(report)
        if unheld is not None:
            return ActionResult(False, f"{unheld}; nothing was stopped")
        stopped = self._actions.stop_locked(report)
        if not stopped.ok:
            self._door.release_back()
            return stopped
        started = self._actions.start_locked(report, order.wait_ready, command, overrides)
        new = self._server.record()
        return _Relaunch(
            change=change,
            started=started,
            launch_id=new.launch_id if new is not None else None,
            previous=previous if serving else None,
            previous_overrides=old_overrides,
        )

    def _start_failed_here(self, relaunch: _Relaunch, started: ActionResult | Loading) -> bool:
        """Whether the relaunch's own start failed (nothing of it serves, and nobody else has
        acted since): not one still loading, nor one another vramtop stopped or replaced."""
        if isinstance(started, ActionResult):
            return True  # refused by `start_locked` itself (port taken, could not launch), locked
        rec = self._server.record()
        return (
            rec is not None
            and rec.launch_id == relaunch.launch_id
            and rec.state == Lifecycle.CRASHED
        )

    def _roll_back(
        self,
        relaunch: _Relaunch,
        failed: ActionResult,
        report: ProgressCallback,
        timeout_s: float,
    ) -> ActionResult:
        """The new start failed: start the previous server's command again (when one
        served before), and say what failed, in vLLM's words, and what serves now."""
        asked = _asked(relaunch.change)
        cause = (self._cause_of(relaunch) or failed.message).rstrip(". ")
        previous = relaunch.previous
        if previous is None:
            self._server.locked(lambda: self._forget_overrides(relaunch))
            return ActionResult(False, f"{asked} failed: {cause}", failed.detail)
        was = _previous_flags(previous[0], relaunch.change)

        def act() -> ActionResult | Loading:
            rec = self._server.record()
            if rec is None or rec.launch_id != relaunch.launch_id or self._server.alive(rec):
                return ActionResult(False, "another vramtop acted on the server meanwhile")
            report("starting the previous flags again")
            return self._actions.start_locked(report, True, previous, relaunch.previous_overrides)

        back = self._actions.launch_then_wait(act, report, timeout_s)
        if back.ok:
            return ActionResult(
                False,
                f"{asked} failed: {cause}; the previous flags ({was}) serve again",
                failed.detail,
                rolled_back=True,
            )
        self._server.locked(lambda: self._forget_overrides(relaunch))
        return ActionResult(
            False,
            f"{asked} failed: {cause}; starting the previous flags ({was}) again failed "
            f"too: {back.message}",
            failed.detail,
        )

    def _cause_of(self, relaunch: _Relaunch) -> str | None:
        """Why the relaunch's start failed, as its record says (vLLM's own words); None when
        it launched nothing (the record is the old server's)."""
        rec = self._server.record()
        if rec is None or rec.launch_id != relaunch.launch_id or rec.state != Lifecycle.CRASHED:
            return None
        return rec.last_error

    def _forget_overrides(self, relaunch: _Relaunch) -> None:
        """A relaunch that failed and was not rolled back: its flags must not stick (a later
        restart would use them), so its record keeps the previous ones."""
        rec = self._server.record()
        if rec is not None and rec.launch_id == relaunch.launch_id:
            rec.flag_overrides = dict(relaunch.previous_overrides)
            state.save(rec)

    def _saved(self, result: ActionResult, before: Profile) -> ActionResult:
        """The relaunch served: write its change into the profile's file, and drop the
        record's overrides that the file now says."""
        failed = _save_profile(before, self._server.profile)
        if failed is not None:
            return ActionResult(
                False, f"{result.message}, but the profile could not be saved: {failed}"
            )

        def forget() -> None:
            rec = self._server.record()
            if rec is not None and rec.flag_overrides:
                rec.flag_overrides = {}  # the profile says them now
                state.save(rec)

        self._server.locked(forget)
        self._server.file_profile = self._server.profile
        return result


def _unsavable(profile: Profile) -> str | None:
    """Why a relaunch's change could not be written into the profile's file (a link)."""
    from vramtop.settings import link_problem

    return link_problem(_profile_file(profile))


def _profile_file(profile: Profile) -> Path:
    from vramtop import locations

    return profile.loaded_from or locations.profiles_dir() / f"{profile.name}.toml"


def _save_profile(before: Profile, after: Profile) -> str | None:
    """Write a relaunch's change into the profile's file (the one it was read from, its
    comments and layout kept); returns what went wrong, or None."""
    try:
        from vramtop import profile_file

        profile_file.save_relaunch_file(_profile_file(after), before, after)
    except OSError as exc:  # (a full disk: the file and the fix, as every writer says it)
        from vramtop import files

        return files.problem_words(exc) or str(exc)
    except Exception as exc:  # a write failure is reported, never raised
        return str(exc)
    return None


def _asked(change: FlagChange) -> str:
    """The relaunch in words: "relaunch at 0.99", "relaunch with --max-model-len 4096"."""
    changes = change.argv_changes()
    budget = changes.pop(vllm_args.GPU_MEMORY_UTILIZATION, None)
    words = ["relaunch"]
    if budget is not None:
        words.append(f"at {budget}")
    if changes:
        words.append("with " + ", ".join(f"{f} {v}" for f, v in changes.items()))
    return " ".join(words)


def _previous_flags(argv: list[str], change: FlagChange) -> str:
    """The changed flags as the previous command had them: "0.93", "--max-model-len 163840"."""
    said = []
    for flag in change.argv_changes():
        value = vllm_args.get_flag(argv, flag)
        if flag == vllm_args.GPU_MEMORY_UTILIZATION:
            said.append(value if value is not None else "vLLM's default budget")
        else:
            said.append(f"{flag} {value}" if value is not None else f"no {flag}")
    return ", ".join(said)
