"""A relaunch's parameters travel as one value, `RelaunchOrder`, from whoever asks (the
console, the guard, `vramtop relaunch`) to the relaunch that writes its flags into the command
line: no step on the way declares them again."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from vramtop.core.remedy import RelaunchOrder
from vramtop.machines.deferred_backend import DeferredControl
from vramtop.machines.interface import ServerControl
from vramtop.machines.machine_control import MachineControl
from vramtop.supervisor.relaunching import Relauncher
from vramtop.supervisor.service import Supervisor

ORDER_FIELDS = {"change", "save", "wait_ready", "timeout_s", "precheck"}
STEPS: list[Callable[..., Any]] = [
    ServerControl.relaunch,
    DeferredControl.relaunch,
    MachineControl.relaunch,
    Supervisor.relaunch,
    Relauncher.relaunch,
]


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.__qualname__)
def test_each_step_takes_the_order_and_declares_none_of_its_fields(
    step: Callable[..., Any],
) -> None:
    params = inspect.signature(step).parameters
    assert "order" in params
    assert not ORDER_FIELDS & set(params), sorted(ORDER_FIELDS & set(params))


def test_the_order_carries_every_parameter_a_relaunch_had() -> None:
    fields = set(RelaunchOrder.__dataclass_fields__)
    assert fields == ORDER_FIELDS
