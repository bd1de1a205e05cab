"""The product's choice of a loopback port for a server that binds it later (the demo's
vLLM, the vLLM behind a front door): free, below the ephemeral range, never one to avoid."""

from __future__ import annotations

import socket
from pathlib import Path

from vramtop import ports


def test_the_ephemeral_range_is_read_and_a_damaged_file_falls_back(tmp_path: Path) -> None:
    path = tmp_path / "ip_local_port_range"
    path.write_text("40000\t60999\n")
    assert ports.ephemeral_floor(path) == 40000
    path.write_text("nonsense\n")
    assert ports.ephemeral_floor(path) == ports.EPHEMERAL_FLOOR
    assert ports.ephemeral_floor(tmp_path / "absent") == ports.EPHEMERAL_FLOOR


def _two_free(low: int, high: int) -> tuple[int, int]:
    free = [p for p in range(low, high) if ports.is_free(p)]
    assert len(free) >= 2, "this machine holds nearly every port of the range"
    return free[0], free[-1]


def test_a_port_held_or_to_avoid_is_never_chosen() -> None:
    floor = ports.CHOSEN_FROM + 1000
    held, left = _two_free(ports.CHOSEN_FROM, floor)
    avoid = set(range(ports.CHOSEN_FROM, floor)) - {held, left}
    with socket.socket() as listener:
        listener.bind((ports.LOOPBACK, held))
        listener.listen()
        assert not ports.is_free(held)
        # Of the whole range only `held` and `left` are not avoided, and `held` is taken:
        # `left`, or (where something took it meanwhile: other tests choose here too) the
        # kernel's choice from the ephemeral range; never `held`, never one avoided.
        port = ports.free_port(avoid, floor=floor)
        assert port != held and port not in avoid, port
        assert port == left or port >= ports.ephemeral_floor(), port


def test_a_range_too_narrow_below_the_ephemeral_ports_takes_the_kernels_choice() -> None:
    port = ports.free_port(avoid={ports.CHOSEN_FROM}, floor=ports.CHOSEN_FROM + 10)
    assert port not in range(ports.CHOSEN_FROM, ports.CHOSEN_FROM + 10)
    assert 0 < port < 65536
