"""The exporter says an action another process is taking on the server (a `vramtop restart`
from a terminal, here a real second process holding the profile's action lock): its seconds
so far by action, where the record's state alone says `stopped`, then `starting`; nothing
once that process has let go."""

from __future__ import annotations

from test_guard_series import backend_of

from tests.support.acting_elsewhere import acting_elsewhere
from vramtop.core.exposition import series_for
from vramtop.export.exporter import Exporter


def series_named(exporter: Exporter, name: str) -> dict[str, float]:
    """A fresh sample's series `name`, by their first label's value."""
    exporter.sample_once()
    return {s.labels[0][1]: s.value for s in series_for(exporter.state()) if s.name == name}


def test_another_process_restarting_the_server_is_exported_while_it_acts() -> None:
    backend = backend_of("elsewhere")
    exporter = Exporter(backend)
    try:
        assert series_named(exporter, "vramtop_action_under_way_seconds") == {}
        with acting_elsewhere("elsewhere"):
            found = series_named(exporter, "vramtop_action_under_way_seconds")
            assert list(found) == ["restart"] and found["restart"] >= 0.0
        assert series_named(exporter, "vramtop_action_under_way_seconds") == {}
    finally:
        backend.close(stop_server=False)
