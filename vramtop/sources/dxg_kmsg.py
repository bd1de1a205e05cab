"""WSL2's kernel log: how often the card could not take vLLM's memory back.

When an allocation cannot be made resident on the card again (the desktop holds the VRAM it
was pushed out of), WSL2's GPU driver (dxgkrnl) logs
`misc dxg: dxgk: dxgkio_make_resident: Ioctl failed: -12` (-12: ENOMEM; microsoft/WSL
#41176). Those lines are one more sign that the server is decoding from host memory.

`ResidencyWatch` counts such lines among the records added to the kernel's log since its
previous read. It reads `/dev/kmsg` without blocking: opened with O_NONBLOCK and positioned at
its end when first read, so only new records count, and each read stops where the log does
(EAGAIN), or after `MAX_RECORDS_PER_READ` records (the rest are counted next time). Reading
/dev/kmsg needs CAP_SYSLOG where `kernel.dmesg_restrict` is 1 (Ubuntu's default); where it
cannot be read the count is None and `problem` says why and how to allow it. The other dxg
lines WSL2 logs at every start (`dxgkio_query_adapter_info: Ioctl failed: -22`) are not
counted: they are harmless.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

KMSG = Path("/dev/kmsg")
DMESG_RESTRICT = Path("/proc/sys/kernel/dmesg_restrict")
# One read of /dev/kmsg returns one record (a kernel line is at most ~1 KiB, with its
# dictionary lines); a plain file (a test's) gives several at once.
READ_BYTES = 8192
MAX_RECORDS_PER_READ = 4096
# After /dev/kmsg could not be opened, it is tried again only every this many reads: someone
# who allows it (sysctl) while vramtop runs sees the count within a minute at 1 Hz.
REOPEN_EVERY_READS = 60
ALLOW_HINT = (
    "allow reading the kernel log: sudo sysctl -w kernel.dmesg_restrict=0 (to keep it: "
    "echo kernel.dmesg_restrict=0 | sudo tee /etc/sysctl.d/60-dmesg.conf)"
)

_RESIDENCY_FAILED = re.compile(r"dxgkio_make_resident\b.*\bfailed\b\D*-12\b")
# A /dev/kmsg record: "PRIORITY,SEQUENCE,MICROSECONDS,FLAGS[,…];MESSAGE".
_KMSG_PREFIX = re.compile(r"^\d+,\d+,\d+,[^;]*;")


def message_of(line: str) -> str | None:
    """The message of one log line: a /dev/kmsg record's text after its prefix, or a
    dmesg line as it stands; None for a record's dictionary line (" SUBSYSTEM=misc")."""
    if line.startswith(" "):
        return None
    return _KMSG_PREFIX.sub("", line, count=1)


def is_residency_failure(message: str) -> bool:
    """True for dxgkrnl's `dxgkio_make_resident: Ioctl failed: -12`."""
    return _RESIDENCY_FAILED.search(message) is not None


def count_residency_failures(lines: Iterable[str]) -> int:
    """How many of `lines` (kmsg records or dmesg output) are residency failures."""
    count = 0
    for line in lines:
        message = message_of(line)
        if message is not None and is_residency_failure(message):
            count += 1
    return count


def unreadable_reason(exc: OSError, path: Path = KMSG) -> str:
    """Why `path` cannot be read, in words a user can act on."""
    if exc.errno in (errno.EPERM, errno.EACCES):
        restricted = _dmesg_restricted()
        why = " (kernel.dmesg_restrict is 1)" if restricted else ""
        return f"{path} is not readable by this user{why}"
    if exc.errno == errno.ENOENT:
        return f"{path} does not exist here"
    return f"{path} cannot be read ({exc.strerror or exc})"


def _dmesg_restricted(path: Path = DMESG_RESTRICT) -> bool:
    try:
        return path.read_text().strip() == "1"
    except OSError:
        return False


class ResidencyWatch:
    """Counts new residency-failure lines in the kernel's log; never blocks, never raises.

    `read()` gives the count since the previous read (0 at the first: the log is read from
    the moment the watch opened it), or None while the log cannot be read (`problem` says
    why). Not thread-safe on its own: the GPU probe calls it under its lock."""

    def __init__(self, path: Path = KMSG) -> None:
        self.path = Path(path)
        self.problem: str | None = None
        self._fd: int | None = None
        self._reopen_in = 0
        self._rest = b""  # a plain file's line cut by a read's size

    def read(self) -> int | None:
        if self._fd is None and not self._open():
            return None
        try:
            return count_residency_failures(self._new_lines())
        except OSError as exc:
            log.debug("kernel log read failed: %s", exc)
            self.problem = unreadable_reason(exc, self.path)
            self.close()
            self._reopen_in = REOPEN_EVERY_READS - 1
            return None

    def close(self) -> None:
        fd, self._fd = self._fd, None
        self._rest = b""
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _open(self) -> bool:
        if self._reopen_in > 0:
            self._reopen_in -= 1
            return False
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            self.problem = unreadable_reason(exc, self.path)
            self._reopen_in = REOPEN_EVERY_READS - 1
            return False
        try:
            os.lseek(fd, 0, os.SEEK_END)  # only what is logged from now on
        except OSError as exc:
            os.close(fd)
            self.problem = unreadable_reason(exc, self.path)
            self._reopen_in = REOPEN_EVERY_READS - 1
            return False
        self._fd, self.problem = fd, None
        return True

    def _new_lines(self) -> list[str]:
        assert self._fd is not None
        lines: list[str] = []
        for _ in range(MAX_RECORDS_PER_READ):
            try:
                chunk = os.read(self._fd, READ_BYTES)
            except BlockingIOError:  # EAGAIN: nothing more in the log
                break
            except BrokenPipeError:  # EPIPE: records overwritten before we read them
                continue
            if not chunk:  # a plain file's end
                break
            *whole, self._rest = (self._rest + chunk).split(b"\n")
            lines.extend(raw.decode("utf-8", errors="replace") for raw in whole)
        return lines


def kmsg_problem(path: Path = KMSG) -> str | None:
    """Why the kernel's log cannot be read here (None: it can), for `vramtop doctor`."""
    watch = ResidencyWatch(path)
    try:
        watch.read()
        return watch.problem
    finally:
        watch.close()
