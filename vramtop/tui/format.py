"""Small text helpers shared by the widgets: numbers in the units people read."""

from __future__ import annotations

from vramtop.core.model import GIB, Sample, ServerState
from vramtop.core.rate_figures import rate_text


def gib(value: int | float | None, digits: int = 1) -> str:
    if value is None:
        return "—"
    return f"{value / GIB:.{digits}f}"


def tps(value: float | None) -> str:
    """A token rate: whole, never 0 above 0 (the core's one rule)."""
    return rate_text(value)


def count(value: float | int | None) -> str:
    return "—" if value is None else f"{int(value):,}"


def duration(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return "—"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def ready_time(seconds: float) -> str:
    """A start's time to ready: a quick one reads "0.6s", not "0s" beside a status line that
    says 0.6 s (and the header and the event timeline say the same of one start)."""
    return f"{seconds:.1f}s" if 0 <= seconds < 10 else duration(seconds)


def uptime(seconds: float | None) -> str:
    """Like `duration`, but whole minutes once past the first: the header then changes (and
    repaints) once a minute instead of every second."""
    if seconds is not None and 60 <= seconds < 3600:
        return f"{int(seconds) // 60}m"
    return duration(seconds)


def server_gone(sample: Sample) -> str | None:
    """Why the figures on screen are a previous server's (None: they are the live one's)."""
    state = sample.info.state if sample.info else None
    if state is ServerState.CRASHED:
        return "the server is down"
    if state is ServerState.STOPPED:
        return "the server is stopped"
    if sample.server is not None and sample.server.stale:
        return "the server does not answer"
    return None
