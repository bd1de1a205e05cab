"""Reading a recorded session back into typed records: the header, `Sample`s and events.

Tolerant as the format asks: unknown fields are ignored, missing ones mean "not known", and a
cut last line (vramtop stopped mid-write) is skipped, as is any damaged line anywhere: one that
is not JSON, not UTF-8 (a bad byte is that line's damage, never the file's), or longer than
`MAX_LINE_BYTES` (read in pieces and dropped, never held whole). A file that is not a session
at all raises `SessionError` with a sentence a user can act on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO

from vramtop.core.bounds import MAX_LINE_BYTES, version_problem
from vramtop.core.diagnosis.rates import counter_rate
from vramtop.core.model import (
    GpuDevice,
    GpuReading,
    Rates,
    Sample,
    Split,
)
from vramtop.core.server_events import Event
from vramtop.core.windows.session_fields import reading_from_sample
from vramtop.session.recorded_sample import (
    SessionHeader,
    read_count,
    read_device,
    read_door,
    read_number,
    read_server,
    read_split,
)
from vramtop.session.writer import FORMAT, VERSION


class SessionError(Exception):
    """The file cannot be read as a vramtop session (the message says why)."""


Record = Sample | Event


class SessionReader:
    """Opens and validates `path`; iterate it (or call `records()`) for the records in order."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.skipped_lines = 0
        self.samples_read = 0
        try:
            with self.path.open("rb") as f:
                first = f.readline(MAX_LINE_BYTES + 1)
        except FileNotFoundError:
            raise SessionError(f"{self.path}: no such file") from None
        except OSError as e:
            raise SessionError(f"{self.path}: cannot be read ({e.strerror or e})") from None
        if not first.strip():
            raise SessionError(f"{self.path}: the file is empty, not a vramtop session")
        try:
            if len(first) > MAX_LINE_BYTES:
                raise ValueError("the header line is too long")
            raw = json.loads(first.decode("utf-8"))
        except (ValueError, RecursionError):  # RecursionError: JSON nested thousands deep
            # (UnicodeDecodeError is a ValueError: a bad byte in the header.)
            raise SessionError(
                f"{self.path}: the first line is not JSON; is this a vramtop session file?"
            ) from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise SessionError(f"{self.path}: not a vramtop session (no '{FORMAT}' header)")
        problem = version_problem(raw, VERSION)
        if problem is not None:
            raise SessionError(f"{self.path}: {problem}")
        version: int = raw["version"]
        host: dict[str, Any] = raw["host"] if isinstance(raw.get("host"), dict) else {}
        gpus: list[Any] = raw["gpus"] if isinstance(raw.get("gpus"), list) else []
        server: dict[str, Any] | None = (
            raw["server"] if isinstance(raw.get("server"), dict) else None
        )
        self.header = SessionHeader(
            started_at=raw.get("started_at") if isinstance(raw.get("started_at"), str) else None,
            version=version,
            wsl=host.get("wsl") if isinstance(host.get("wsl"), bool) else None,
            gpus=tuple(g for g in gpus if isinstance(g, dict)),
            server=server,
            raw=raw,
        )

    def __iter__(self) -> Iterator[Record]:
        return self.records()

    def records(self) -> Iterator[Record]:
        """Samples (rebuilt as `Sample` values, with rates from the counters) and events."""
        previous: Sample | None = None
        try:
            with self.path.open("rb") as f:
                _skip_line(f)  # the header, read by __init__
                for text in _bounded_lines(f):
                    if text is None:  # too long, or not UTF-8: damaged
                        self.skipped_lines += 1
                        continue
                    record = self._parse(text)
                    if record is None:
                        continue
                    if isinstance(record, Sample):
                        record = _with_rates(previous, record)
                        previous = record
                        self.samples_read += 1
                    yield record
        except OSError as e:
            raise SessionError(f"{self.path}: cannot be read ({e.strerror or e})") from None

    def _parse(self, text: str) -> Record | None:
        """One line as a record; None for a blank line or a damaged one (counted)."""
        if not text.strip():
            return None
        try:
            return self._record(text)
        except (ValueError, TypeError, OverflowError, RecursionError):
            # A cut last line, or a damaged one (not JSON, JSON nested thousands deep, values
            # of the wrong kind): skip it, the rest is still the session.
            self.skipped_lines += 1
            return None

    def _record(self, text: str) -> Record | None:
        obj = json.loads(text)
        if not isinstance(obj, dict) or read_number(obj, "t") is None:
            self.skipped_lines += 1
            return None
        t = float(obj["t"])
        if isinstance(obj.get("event"), str):
            detail = obj.get("detail")
            return Event(t, obj["event"], detail if isinstance(detail, dict) else {})
        return self._sample(t, obj)

    def _sample(self, t: float, obj: Mapping[str, Any]) -> Sample:
        devices: list[GpuDevice] = []
        split: Split | None = None
        for i, g in enumerate(obj.get("gpus") or []):
            if not isinstance(g, dict):
                continue
            device = read_device(g, self.header)
            if device is None:
                continue
            devices.append(device)
            if i == 0:
                split = read_split(g, device, self._util(obj))
        server = obj.get("server")
        reading, info = (
            read_server(server, self.header) if isinstance(server, dict) else (None, None)
        )
        return Sample(
            t=t,
            gpu=GpuReading(
                devices=tuple(devices),
                source="recording",
                # (The recording machine could not read its GPU then: a sample keeps none.)
                error=None if devices else "the recording has no GPU reading at this point",
                residency_failures=read_count(obj, "residency_failures"),
            ),
            server=reading,
            info=info,
            split=split,
            windows=reading_from_sample(obj),
            door=read_door(obj.get("door")),
        )

    def _util(self, obj: Mapping[str, Any]) -> float | None:
        server = obj.get("server")
        util = read_number(server, "gpu_memory_utilization") if isinstance(server, dict) else None
        if util is None and self.header.server is not None:
            util = read_number(self.header.server, "gpu_memory_utilization")
        return util


def _skip_line(f: BinaryIO) -> None:
    """Past the next newline (or the end), reading at most `MAX_LINE_BYTES` at a time."""
    while True:
        piece = f.readline(MAX_LINE_BYTES)
        if not piece or piece.endswith(b"\n"):
            return


def _bounded_lines(f: BinaryIO) -> Iterator[str | None]:
    """Each line of `f` decoded, or None for a damaged one: longer than `MAX_LINE_BYTES` (its
    rest skipped, never held) or not UTF-8. Memory stays within one line's limit."""
    while True:
        raw = f.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            _skip_line(f)
            yield None
            continue
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            yield None


def _with_rates(previous: Sample | None, sample: Sample) -> Sample:
    """Rates derived from the counters of two consecutive samples (None across a reset)."""
    if previous is None:
        return sample
    pm = previous.server.metrics if previous.server else None
    m = sample.server.metrics if sample.server else None
    if pm is None or m is None:
        return sample
    dt = sample.t - previous.t
    rates = Rates(
        generation_tps=counter_rate(pm.generation_tokens_total, m.generation_tokens_total, dt),
        prompt_tps=counter_rate(pm.prompt_tokens_total, m.prompt_tokens_total, dt),
        preemptions_per_s=counter_rate(pm.preemptions_total, m.preemptions_total, dt),
    )
    return replace(sample, rates=rates)


def read_session(path: str | Path) -> tuple[SessionHeader, list[Record]]:
    """The whole session in memory (fine for diagnosis: a day at 1 Hz is ~86,400 records)."""
    reader = SessionReader(path)
    return reader.header, list(reader.records())
