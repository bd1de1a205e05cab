"""PowerShell's output is outside input: a line without end is read in pieces and dropped,
never buffered whole, and the readings after it still arrive."""

from __future__ import annotations

import io
import os
import stat
import tracemalloc
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from tests.support.waiting import PROCESS_S, wait_until
from vramtop.sources.windows_counters import MAX_READING_BYTES, WindowsGpuSource, bounded_lines

FAKE = Path(__file__).parent.parent / "fixtures" / "fake_powershell" / "powershell.exe"


class _Endless(io.RawIOBase):
    """`size` bytes of 'x' with no newline, then one line: read as a pipe is."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.tail = b"\nafter\n"

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
        if self.left > 0:
            n = min(len(buffer), self.left)
            buffer[:n] = b"x" * n
            self.left -= n
            return n
        n = min(len(buffer), len(self.tail))
        buffer[:n], self.tail = self.tail[:n], self.tail[n:]
        return n


def test_a_line_without_a_newline_is_dropped_in_bounded_memory() -> None:
    stream = io.BufferedReader(_Endless(200 << 20), buffer_size=65536)
    tracemalloc.start()
    try:
        lines = list(bounded_lines(stream))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert lines == [None, b"after\n"]
    assert peak < 8 * MAX_READING_BYTES  # the 200 MB line was held whole


@settings(max_examples=examples(300), deadline=None)
@given(data=st.binary(max_size=2000), limit=st.integers(min_value=1, max_value=64))
@example(data=b"\x00\n\x00\x01\n\x01", limit=1)  # a line dropped between two kept
def test_any_bytes_are_lines_within_the_limit_or_dropped(data: bytes, limit: int) -> None:
    lines = list(bounded_lines(io.BufferedReader(io.BytesIO(data)), limit))  # type: ignore[arg-type]
    # Each line of `data` (its newline kept) in order: itself within the limit (the newline
    # not counted), else None. (Kept lines joined need not be in `data`: a dropped line can
    # sit between two kept ones.)
    *ended, last = data.split(b"\n")
    whole = [line + b"\n" for line in ended] + ([last] if last else [])
    assert lines == [line if len(line.rstrip(b"\n")) <= limit else None for line in whole]


def test_readings_after_an_endless_line_still_arrive(tmp_path: Path) -> None:
    # A PowerShell that first writes 64 MiB without a newline, then behaves.
    wrapper = tmp_path / "powershell.exe"
    wrapper.write_text(
        "#!/bin/sh\n"
        "head -c 67108864 /dev/zero | tr '\\0' 'x'\n"
        f'exec {os.environ.get("PYTHON", "python3")} {FAKE} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    env = {
        **os.environ,
        "PATH": f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}",
        "VRAMTOP_FAKE_PS_MODE": "normal",
        "VRAMTOP_FAKE_PS_INTERVAL_S": "0.05",
    }
    source = WindowsGpuSource(interval_s=0.05, env=env, check_interop=False, backoff_s=(0.05,))
    try:
        wait_until(lambda: source.read().available, deadline_s=PROCESS_S, what="a reading")
    finally:
        source.close()
