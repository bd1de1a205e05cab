"""WSL2's residency failures in the kernel's log, on captured-style text and real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vramtop.sources.dxg_kmsg import (
    REOPEN_EVERY_READS,
    ResidencyWatch,
    count_residency_failures,
    kmsg_problem,
)

# `dmesg` on a WSL2 machine during a call (the lines WSL2 logs at every start, then the
# residency failures of microsoft/WSL #41176).
DMESG = """\
[    0.286481] hv_vmbus: registering driver dxgkrnl
[    1.564415] misc dxg: dxgk: dxgkio_is_feature_enabled: Ioctl failed: -22
[    1.568518] misc dxg: dxgk: dxgkio_query_adapter_info: Ioctl failed: -22
[    1.569584] misc dxg: dxgk: dxgkio_query_adapter_info: Ioctl failed: -2
[ 4112.902113] misc dxg: dxgk: dxgkio_make_resident: Ioctl failed: -12
[ 4112.904871] misc dxg: dxgk: dxgkio_make_resident: Ioctl failed: -12
[ 4113.001502] misc dxg: dxgk: dxgkio_make_resident: Ioctl failed: -22
[ 4113.120044] misc dxg: dxgk: dxgkio_make_resident: Ioctl failed: -12
"""
# The same kind of lines as /dev/kmsg records: a prefix, then dictionary lines.
RECORD = (
    "3,{seq},4112902113,-;misc dxg: dxgk: dxgkio_make_resident: Ioctl failed: -12\n"
    " SUBSYSTEM=misc\n"
    " DEVICE=c10:125\n"
)
OTHER = "6,{seq},4112902200,-;hv_balloon: Balloon request will be partially fulfilled.\n"


def test_dmesg_text_counts_only_the_make_resident_out_of_memory_lines() -> None:
    # -12 (ENOMEM) is memory that could not be made resident; -22 is a bad argument, and
    # the adapter-info lines WSL2 logs at every start are harmless.
    assert count_residency_failures(DMESG.splitlines()) == 3


def test_kmsg_records_are_counted_by_their_message_not_their_dictionary() -> None:
    text = RECORD.format(seq=1) + OTHER.format(seq=2) + RECORD.format(seq=3)
    assert count_residency_failures(text.splitlines()) == 2
    # A dictionary line that happens to hold the words is not a record of its own.
    assert count_residency_failures([" MESSAGE=dxgkio_make_resident: Ioctl failed: -12"]) == 0


def test_the_watch_counts_what_was_logged_since_its_previous_read(tmp_path: Path) -> None:
    log = tmp_path / "kmsg"
    log.write_text(RECORD.format(seq=1) * 4)
    watch = ResidencyWatch(log)
    assert watch.read() == 0  # what was there before vramtop looked is not this session's
    with log.open("a") as f:
        f.write(RECORD.format(seq=5) + OTHER.format(seq=6) + RECORD.format(seq=7))
    assert watch.read() == 2
    assert watch.read() == 0
    with log.open("a") as f:
        f.write(RECORD.format(seq=8)[:30])  # cut mid-record by the read's size
    assert watch.read() == 0
    with log.open("a") as f:
        f.write(RECORD.format(seq=8)[30:])
    assert watch.read() == 1
    watch.close()


def test_a_log_it_may_not_read_is_none_with_the_reason_and_retried_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() == 0:
        # root reads a 0000 file: stand in for the kernel's refusal (dmesg_restrict=1).
        real_open = os.open

        def refuse(path: object, *args: object, **kwargs: object) -> int:
            if Path(str(path)) == log:
                raise PermissionError(1, "Operation not permitted")
            return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "open", refuse)
    log = tmp_path / "kmsg"
    log.write_text("")
    log.chmod(0)
    watch = ResidencyWatch(log)
    assert watch.read() is None
    assert watch.problem is not None and "not readable by this user" in watch.problem
    assert kmsg_problem(log) == watch.problem
    log.chmod(0o600)
    monkeypatch.undo()
    # Not tried again at once (each read is a tick)…
    assert all(watch.read() is None for _ in range(REOPEN_EVERY_READS - 1))
    # …but within a minute at 1 Hz, once allowed.
    assert watch.read() == 0 and watch.problem is None
    watch.close()


def test_no_such_log_says_so(tmp_path: Path) -> None:
    problem = kmsg_problem(tmp_path / "missing")
    assert problem is not None and "does not exist" in problem


@pytest.mark.skipif(kmsg_problem() is not None, reason="/dev/kmsg is not readable here")
def test_the_real_kernel_log_is_read_without_blocking() -> None:
    # /dev/kmsg blocks a plain read until the kernel logs something: the watch must not.
    watch = ResidencyWatch()
    assert watch.read() == 0  # positioned at the end: nothing new yet
    count = watch.read()
    assert count is not None and count >= 0
    watch.close()
