"""An open console's supervisor starts what the profile's file says now: `vramtop import
--force` replaces the file while the console is open, and `s` must not start the old command."""

from __future__ import annotations

from pathlib import Path

from supervisor_helpers import fake_profile, ledger_empty

from tests.support.ports import free_port
from vramtop import profiles
from vramtop.supervisor import Supervisor


def test_a_profile_replaced_on_disk_is_read_again_before_a_start(home: Path, ledger: Path) -> None:
    port = free_port()
    profiles.save_profile(fake_profile("mine", port, ledger, util=0.9))
    console = Supervisor(
        profiles.load_profile("mine"), memory_released=lambda: ledger_empty(ledger)
    )
    # What `vramtop import --force` does meanwhile, from another shell.
    profiles.save_profile(fake_profile("mine", port, ledger, util=0.8), overwrite=True)
    try:
        assert console.start().ok
        info = console.status()
        assert info.budget == 0.8 and "0.8" in info.argv
        assert console.restart().ok
        assert console.status().budget == 0.8
    finally:
        assert console.stop().ok


def test_a_profile_file_that_no_longer_reads_leaves_the_one_read(home: Path, ledger: Path) -> None:
    port = free_port()
    path = profiles.save_profile(fake_profile("kept", port, ledger, util=0.9))
    console = Supervisor(
        profiles.load_profile("kept"), memory_released=lambda: ledger_empty(ledger)
    )
    path.write_text("argv = [\n")  # half-written by hand
    try:
        assert console.start().ok
        assert console.status().budget == 0.9
    finally:
        assert console.stop().ok
