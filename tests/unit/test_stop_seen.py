"""A stop seen under way is a stop, whatever the server was doing when it came (loading
or serving), and also when it is the first thing a console sees (opened during the stop):
the exit seen next was asked for."""

from __future__ import annotations

import pytest

from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.findings import Kind
from vramtop.core.model import GpuReading, Sample, ServerInfo, ServerState
from vramtop.session.live import lifecycle_events


def _sample(t: float, state: ServerState) -> Sample:
    return Sample(t=t, gpu=GpuReading(source="sim"), info=ServerInfo(state=state, returncode=-15))


@pytest.mark.parametrize("before", [ServerState.STARTING, ServerState.RUNNING, None])
def test_a_stop_seen_under_way_then_ended_opens_no_crash(before: ServerState | None) -> None:
    first = [] if before is None else [_sample(0, before)]
    seen = [*first, _sample(1, ServerState.STOPPING), _sample(2, ServerState.STOPPED)]
    diagnoser = Diagnoser()
    names = []
    for previous, sample in zip([None, *seen], seen, strict=False):
        for event in lifecycle_events(previous, sample):
            names.append(event.name)
            diagnoser.feed_event(event.t, event.name, event.detail)
        diagnoser.feed_sample(sample)
    assert "stop" in names and "exit" in names
    assert Kind.SERVER_CRASHED not in [f.kind for f in diagnoser.all_findings()]
