"""Reading a recorded session back into typed records: the header, `Sample`s and events.

Tolerant as the format asks: unknown fields are ignored, missing ones mean "not known", and a
cut last line (vramtop stopped mid-write) is skipped, as is any damaged line anywhere: one that
is not JSON, not UTF-8 (a bad byte is that line's damage, never the file's), or longer than
`MAX_LINE_BYTES` (read in pieces and dropped, never held whole). A file that is not a session
at all raises `SessionError` with a sentence a user can act on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO

from vramtop.core.bounds import MAX_LINE_BYTES, version_problem
from vramtop.core.diagnosis.normal_rate import REMEMBERED, NormalRate
from vramtop.core.diagnosis.rates import counter_rate
from vramtop.core.door_fields import door_from_json
from vramtop.core.events import Event
from vramtop.core.model import (
    CacheConfig,
    DoorReading,
    GpuDevice,
    GpuReading,
    MemoryKind,
    ProcessMemory,
    Rates,
    Sample,
    ServerInfo,
    ServerMetrics,
    ServerReading,
    ServerState,
    Split,
    SplitMethod,
)
from vramtop.core.windows.session_fields import reading_from_sample
from vramtop.session.writer import FORMAT, VERSION


class SessionError(Exception):
    """The file cannot be read as a vramtop session (the message says why)."""


@dataclass(frozen=True)
class SessionHeader:
    started_at: str | None
    version: int
    wsl: bool | None
    gpus: tuple[Mapping[str, Any], ...]
    server: Mapping[str, Any] | None
    raw: Mapping[str, Any] = field(default_factory=dict)

    @property
    def normal_rate(self) -> NormalRate | None:
        """The optional `normal_rate`: the normal decode speed the recording compared with
        from its first second (None when absent or unusable)."""
        return NormalRate.from_json(self.raw.get("normal_rate"), source=REMEMBERED)


Record = Sample | Event


def _num(obj: Mapping[str, Any], key: str) -> float | None:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)  # an integer of 400 digits overflows
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _int(obj: Mapping[str, Any], key: str) -> int | None:
    value = _num(obj, key)
    return None if value is None else int(value)


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
        if not isinstance(obj, dict) or _num(obj, "t") is None:
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
            device = _device(g, self.header)
            if device is None:
                continue
            devices.append(device)
            if i == 0:
                split = _split(g, device, self._util(obj))
        server = obj.get("server")
        reading, info = _server(server, self.header) if isinstance(server, dict) else (None, None)
        return Sample(
            t=t,
            gpu=GpuReading(
                devices=tuple(devices),
                source="recording",
                # (The recording machine could not read its GPU then: a sample keeps none.)
                error=None if devices else "the recording has no GPU reading at this point",
                residency_failures=_count(obj, "residency_failures"),
            ),
            server=reading,
            info=info,
            split=split,
            windows=reading_from_sample(obj),
            door=_door(obj.get("door")),
        )

    def _util(self, obj: Mapping[str, Any]) -> float | None:
        server = obj.get("server")
        util = _num(server, "gpu_memory_utilization") if isinstance(server, dict) else None
        if util is None and self.header.server is not None:
            util = _num(self.header.server, "gpu_memory_utilization")
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


def _device(g: Mapping[str, Any], header: SessionHeader) -> GpuDevice | None:
    index = _int(g, "index") or 0
    total = _int(g, "total_bytes")
    if total is None:
        total = next((_int(h, "total_bytes") for h in header.gpus if h.get("index") == index), None)
    used = _int(g, "used_bytes")
    if total is None or used is None:
        return None
    name = next((str(h.get("name")) for h in header.gpus if h.get("index") == index), "GPU")
    procs = g.get("processes")
    processes = None
    if isinstance(procs, list):
        processes = tuple(
            ProcessMemory(
                _int(p, "pid") or 0,
                str(p.get("name", "")),
                _int(p, "used_bytes") or 0,
                gtt_bytes=_int(p, "gtt_bytes"),
            )
            for p in procs
            if isinstance(p, dict)
        )
    throttle = g.get("throttle")
    return GpuDevice(
        index=index,
        name=name,
        total_bytes=total,
        used_bytes=used,
        free_bytes=max(0, total - used),
        temperature_c=_int(g, "temperature_c"),
        sm_clock_mhz=_int(g, "sm_clock_mhz"),
        throttle=tuple(str(r) for r in throttle) if isinstance(throttle, list) else (),
        processes=processes,
        memory_kind=_memory_kind(g.get("memory_kind")),
        gtt_used_bytes=_int(g, "gtt_used_bytes"),
        pcie_rx_bytes_per_s=_count(g, "pcie_rx_bytes_per_s"),
        pcie_tx_bytes_per_s=_count(g, "pcie_tx_bytes_per_s"),
        gpu_util=_fraction(g, "gpu_util"),
        memory_util=_fraction(g, "memory_util"),
    )


def _door(value: Any) -> DoorReading | None:
    """A sample's front door (added; absent in older recordings and where none answered)."""
    if not isinstance(value, dict):
        return None
    address = value.get("address")
    return door_from_json(address if isinstance(address, str) else "", value)


def _count(obj: Mapping[str, Any], key: str) -> int | None:
    """An optional count or rate that cannot be negative (None when absent or wrong)."""
    value = _int(obj, key)
    return value if value is not None and value >= 0 else None


def _fraction(obj: Mapping[str, Any], key: str) -> float | None:
    """An optional fraction, 0..1 (None when absent or outside)."""
    value = _num(obj, key)
    return value if value is not None and 0.0 <= value <= 1.0 else None


def _memory_kind(value: Any) -> MemoryKind:
    """A recorded memory kind; dedicated when absent (older recordings) or unknown."""
    try:
        return MemoryKind(str(value)) if value is not None else MemoryKind.DEDICATED
    except ValueError:
        return MemoryKind.DEDICATED


def _split(g: Mapping[str, Any], device: GpuDevice, util: float | None) -> Split | None:
    server = _int(g, "server_bytes")
    desktop = _int(g, "desktop_bytes")
    if desktop is None and server is not None:
        desktop = max(0, device.used_bytes - server)
    if server is None and desktop is None:
        return None
    method = SplitMethod.PER_PROCESS if device.processes is not None else SplitMethod.DERIVED
    budget = math.ceil(device.total_bytes * util) if util is not None else None
    return Split(
        total_bytes=device.total_bytes,
        server_bytes=server,
        desktop_bytes=desktop,
        free_bytes=device.free_bytes,
        method=method,
        detail="As recorded.",
        budget_bytes=budget,
        headroom_bytes=_int(g, "headroom_bytes"),
        memory_kind=device.memory_kind,
        server_gtt_bytes=_int(g, "server_gtt_bytes"),
    )


def _server(
    s: Mapping[str, Any], header: SessionHeader
) -> tuple[ServerReading | None, ServerInfo | None]:
    try:
        state = ServerState(str(s.get("state")))
    except ValueError:
        state = None
    util = _num(s, "gpu_memory_utilization")
    hs = header.server or {}
    metrics = ServerMetrics(
        generation_tokens_total=_num(s, "generation_tokens_total"),
        prompt_tokens_total=_num(s, "prompt_tokens_total"),
        requests_running=_num(s, "requests_running"),
        requests_waiting=_num(s, "requests_waiting"),
        preemptions_total=_num(s, "preemptions_total"),
        kv_cache_usage=_num(s, "kv_cache_usage"),
        inter_token_latency_sum_s=_num(s, "inter_token_latency_sum_s"),
        inter_token_latency_count=_num(s, "inter_token_latency_count"),
        cache=CacheConfig(
            gpu_memory_utilization=util,
            kv_cache_size_tokens=_int(s, "kv_cache_tokens"),
            kv_cache_memory_bytes=_int(s, "kv_cache_memory_bytes"),
        ),
    )
    has_metrics = any(
        v is not None
        for v in (
            metrics.generation_tokens_total,
            metrics.requests_running,
            metrics.kv_cache_usage,
        )
    )
    healthy = s.get("healthy") if isinstance(s.get("healthy"), bool) else None
    # Written only while the server answered; no state (monitor only) counts as running.
    silent = _num(s, "not_answering_s")
    reachable = (
        state in (ServerState.RUNNING, None)
        and (has_metrics or healthy is not None)
        and silent is None  # a server that answers nothing was not reached
    )
    reading = ServerReading(
        url=str(hs.get("url", "")),
        reachable=reachable,
        healthy=healthy,
        metrics=metrics if has_metrics else None,
        stale=bool(s.get("stale", False)),
        not_answering_s=silent,
    )
    argv: list[Any] = hs["argv"] if isinstance(hs.get("argv"), list) else []
    info = None
    if state is not None:
        info = ServerInfo(
            state=state,
            pid=_int(s, "pid"),
            argv=tuple(str(w) for w in argv),
            budget=util if util is not None else _num(hs, "gpu_memory_utilization"),
            max_model_len=_int(hs, "max_model_len"),
            kv_cache_dtype=hs.get("kv_cache_dtype")
            if isinstance(hs.get("kv_cache_dtype"), str)
            else None,
        )
    return reading, info


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
