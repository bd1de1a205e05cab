"""The guard's run: one guard per profile (its locks), its clock, and the loop that hands each
of the runner's ticks to the watch (watch.py) until it is asked to stop.

Time: the policies count in the samples' clock. On the simulated machine that clock is the
simulator's (real time × `VRAMTOP_SIM_SPEED`: rates per simulated second) and the guard
samples once a simulated second, so a day of calls plays out in minutes with the waits (10 s
open, 120 s for a turn, the settle) intact.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING

from vramtop.core.secrets import mask_line
from vramtop.guard.watch import Watch, say
from vramtop.machines.headless_runner import MAX_FAILURES, Runner
from vramtop.outcomes import ExitCode
from vramtop.sim.world_protocol import SPEED_ENV
from vramtop.supervisor.actor import GUARD, NOBODY, ActorLock, guard_lock

if TYPE_CHECKING:
    from vramtop.guard.choices import GuardSettings
    from vramtop.machines.machine_backend import MachineBackend
    from vramtop.notify import Notifier
    from vramtop.supervisor.actor import Holder

# The machine guarded, made once the guard holds its profile: the backend, or why there is
# none (in words). Its argument is the samples' clock for a simulated machine to stamp by.
MakeBackend = Callable[[Callable[[], float]], "MachineBackend | str"]


@dataclass(frozen=True)
class GuardClock:
    """The guard's time, one value for all it does. `samples`: the samples' clock, in which
    the policies count and the pace waits (real seconds, or the simulated machine's);
    `sleep`: the pace's wait, in those seconds; `wall`: Unix time, for what others read (the
    lasting timeline's stamps, the adaptive state `--once --json` shows). A test passes a
    clock it moves."""

    samples: Callable[[], float]
    sleep: Callable[[float], object]
    wall: Callable[[], float] = field(default=time.time)

    @classmethod
    def real(cls, stop: threading.Event, speed: Callable[[], float] | None = None) -> GuardClock:
        """Real time, `speed()` times as fast (the simulated machine's speed, read when used:
        the machine is made after its clock); a wait ends as soon as `stop` is set."""
        pace = speed or _real_time
        return cls(
            samples=lambda: time.monotonic() * pace(),
            sleep=lambda seconds: stop.wait(seconds / pace()),
        )


def _real_time() -> float:
    return 1.0


def sim_speed() -> float:
    """The simulated machine's speed (1: real time)."""
    try:
        speed = float(os.environ.get(SPEED_ENV, "1"))
    except ValueError:
        return 1.0
    return speed if speed > 0 else 1.0


def run_guard(
    name: str,
    make_backend: MakeBackend,
    notifier: Notifier,
    settings: GuardSettings,
    interval_s: float,
    *,
    demo: bool,
) -> int:
    """Guard profile `name` until SIGTERM or SIGINT; the command's exit code. One guard per
    profile: the guard lock is taken before anything starts (a world, an agent); then the
    actor lock, which a console opened first hands over at its next tick."""
    lock = ActorLock(name, GUARD)
    only_guard = guard_lock(name, auto_remedy=settings.auto_remedy)
    try:
        if not only_guard.try_acquire():
            notifier.close()
            holder = only_guard.holder() or NOBODY
            say(
                f"a guard (pid {holder['pid']}) already acts for profile {name}: one "
                "guard per profile; this one leaves"
            )
            return ExitCode.USAGE
        if not lock.wait_acquire(waiting=_waiting_for):
            notifier.close()
            holder = lock.holder() or NOBODY
            say(
                f"a {holder['kind'] or 'vramtop'} (pid {holder['pid']}) acts for "
                f"profile {name} and did not hand over (an older vramtop?): close it, then "
                "start the guard again"
            )
            return ExitCode.USAGE
        stop = threading.Event()
        # On the simulated machine the samples are stamped in simulated seconds.
        clock = GuardClock.real(stop, sim_speed if demo else None)
        backend = make_backend(clock.samples)
        if isinstance(backend, str):
            notifier.close()
            say(backend)
            return ExitCode.USAGE
        _stop_on_signals(stop)
        return guard_loop(backend, notifier, settings, interval_s, stop, clock)
    finally:
        lock.release()
        only_guard.release()


def guard_loop(
    backend: MachineBackend,
    notifier: Notifier,
    settings: GuardSettings,
    interval_s: float,
    stop: threading.Event,
    clock: GuardClock | None = None,
) -> int:
    """Guard `backend` until `stop` is set (the caller holds the profile's actor lock); the
    command's exit code. A sample comes every `interval_s` of `clock`'s samples' clock
    (default: real time, its waits ended by `stop`)."""
    from vramtop.event_log import EventLog

    clock = clock or GuardClock.real(stop)
    name = backend.profile_name or "default"
    backend.asked_by = GUARD
    watch = Watch(backend, notifier, settings, EventLog.for_profile(name), wall=clock.wall)
    watch.begin()
    runner = Runner(backend, interval_s=interval_s, clock=clock.samples, sleep=clock.sleep)
    why, code = "asked to stop; vLLM keeps running", ExitCode.OK
    try:
        runner.run(stop.is_set, watch.on_tick)
    except Exception as exc:
        # Every tick of the last MAX_FAILURES failed (each is in the log with its traceback):
        # leave with a reason, for systemd's Restart=on-failure to begin afresh.
        why = f"{MAX_FAILURES} samples in a row failed (the last: {mask_line(str(exc))}); leaving"
        code = ExitCode.ERROR
        say(why)
    finally:
        watch.end(why)
    if code == ExitCode.OK:
        say("stopped; vLLM keeps running")
    return code


def _waiting_for(holder: Holder) -> None:
    say(f"waiting for the {holder['kind'] or 'vramtop'} (pid {holder['pid']}) to hand over")


def _stop_on_signals(stop: threading.Event) -> None:
    """SIGTERM and SIGINT set `stop`: the guard ends its loop, vLLM goes on."""

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
