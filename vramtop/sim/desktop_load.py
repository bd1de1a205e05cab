"""What the simulated desktop asks of the card over time: each app's idle share, its share
in a call as the call ramps up and down, and a slow wobble. Pure: time is passed in."""

from __future__ import annotations

import math
import random

from vramtop.sim.card import GIB
from vramtop.sim.scenario import Scenario

# Desktop processes get pids above any real pid (pid_max is at most 2**22), so code that walks
# the server's process tree never confuses them with real processes.
DESKTOP_PID_BASE = 4_194_400


class DesktopLoad:
    """The desktop of `scenario`: a call comes by its schedule, or by request (`set_call`),
    and `call_level` follows it, 0 (none) .. 1 (full), at the scenario's ramps."""

    def __init__(self, scenario: Scenario, seed: int = 0) -> None:
        self.scenario = scenario
        self.call_level = 0.0
        self.manual_call: bool | None = None  # a call asked for; None: the schedule's
        rng = random.Random(seed)
        self._phases = [(rng.uniform(0, 2 * math.pi), rng.uniform(20, 60)) for _ in range(16)]

    def call_on(self, t: float) -> bool:
        if self.manual_call is not None:
            return self.manual_call
        return self.scenario.call_scheduled(t)

    def set_call(self, on: bool) -> None:
        """A call by request; it overrides the scenario's schedule from now on."""
        self.manual_call = on

    def ramp(self, t: float, dt: float) -> None:
        """`dt` seconds up to `t`: the call's level towards on (1) or off (0)."""
        target = 1.0 if self.call_on(t) else 0.0
        if self.call_level < target:
            self.call_level = min(target, self.call_level + dt / self.scenario.call_ramp_up_s)
        elif self.call_level > target:
            self.call_level = max(target, self.call_level - dt / self.scenario.call_ramp_down_s)

    def demand(self, t: float) -> list[tuple[int, str, int]]:
        """(pid, name, bytes) for each desktop process at `t`."""
        out = []
        for i, app in enumerate(self.scenario.desktop):
            phase, period = self._phases[i % len(self._phases)]
            wobble = self.scenario.jitter_gib * math.sin(2 * math.pi * t / period + phase)
            gib = max(0.0, app.idle_gib + app.call_gib * self.call_level + wobble)
            out.append((DESKTOP_PID_BASE + i, app.name, int(gib * GIB)))
        return out
