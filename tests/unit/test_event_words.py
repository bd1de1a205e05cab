"""The event list in words, for any recording: a field of the wrong type is shown as it is."""

from __future__ import annotations

import pytest

from vramtop.core.server_events import Event
from vramtop.tui.screens.timeline_screen import describe


def test_events_read_as_words() -> None:
    assert describe(Event(1.0, "relaunch", {"gpu_memory_utilization": 0.85})) == "budget 0.85"
    assert describe(Event(1.0, "ready", {"ready_s": 75})) == "ready in 1m15s"
    # A quick start in the header's words ("ready in 3.0s"), not cut to "2s".
    assert describe(Event(1.0, "ready", {"ready_s": 2.97})) == "ready in 3.0s"
    closed = {"change": "closed", "kind": "vram_contention", "duration_s": 42}
    assert describe(Event(1.0, "finding", closed)) == "vram_contention closed after 42s"


def test_a_relaunch_says_its_flags_and_how_it_ended() -> None:
    served = {"gpu_memory_utilization": 0.85, "max_model_len": 163840, "result": "ok"}
    assert describe(Event(1.0, "relaunch", served)) == (
        "budget 0.85 · max-model-len 163,840 · served"
    )
    back = {"gpu_memory_utilization": 0.99, "result": "rolled_back"}
    assert describe(Event(1.0, "relaunch", back)) == (
        "budget 0.99 · did not start: the previous flags serve again"
    )
    assert describe(Event(1.0, "relaunch", {"result": 7})) == "—"  # a damaged recording


def test_an_event_without_detail_still_says_something() -> None:
    # A start is seen as the server's state turns to starting: it carries no detail, and
    # its row was blank beside "the server is shutting down" of the stop seen.
    assert describe(Event(1.0, "start")) == "the server is starting"
    assert describe(Event(1.0, "ready")) == "—"  # as any unknown in the console


def test_an_exit_without_a_code_says_so_rather_than_none() -> None:
    assert describe(Event(1.0, "exit", {"returncode": 1})) == "exit code 1"
    # A server vramtop did not start, or one a stop ended: "exit code None" read as a bug.
    assert describe(Event(1.0, "exit", {"returncode": None})) == (
        "the server ended (exit code not known)"
    )


@pytest.mark.parametrize(
    ("name", "detail"),
    [
        ("relaunch", {"gpu_memory_utilization": "0.85x"}),
        ("ready", {"ready_s": "soon"}),
        ("finding", {"change": "closed", "kind": "k", "duration_s": "long"}),
        ("finding", {"kind": "k", "summary": "s", "duration_s": [1]}),
    ],
)
def test_a_field_of_the_wrong_type_is_shown_not_fatal(name: str, detail: dict[str, object]) -> None:
    text = describe(Event(1.0, name, detail))
    assert isinstance(text, str) and text
