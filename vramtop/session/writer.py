"""Writing a recorded session: JSON Lines in the session format, one complete line at a time.

Every line is written whole and flushed at once, so a crash of vramtop leaves a file whose
lines are all readable (at worst the last one is cut, and readers skip it). The cost per tick
is one `json.dumps` and one write of a bounded line (process lists are capped).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

from vramtop import files
from vramtop.core.door_fields import door_json
from vramtop.core.findings import Change, Finding
from vramtop.core.json_types import JsonObject, JsonValue
from vramtop.core.model import GpuDevice, MemoryKind, Sample, ServerInfo, ServerState
from vramtop.core.secrets import mask_line
from vramtop.core.server_events import Event, EventName
from vramtop.core.snapshot import card_activity_fields, process_fields
from vramtop.core.windows.session_fields import windows_sample_fields

FORMAT = "vramtop-session"
VERSION = 1
MAX_PROCESSES = 64  # per device and line: keeps a line's size bounded

try:  # the shared argv reader knows every secret flag and both spellings
    from vramtop.core.vllm.args import mask_secrets as _mask_argv
except ImportError:  # pragma: no cover

    def _mask_argv(argv: Sequence[str]) -> list[str]:
        out = list(argv)
        for i, word in enumerate(out):
            if word == "--api-key" and i + 1 < len(out):
                out[i + 1] = "***"
            elif word.startswith("--api-key="):
                out[i] = "--api-key=***"
        return out


def mask_argv(argv: Sequence[str]) -> list[str]:
    """argv with secret values (API keys) replaced."""
    return _mask_argv(list(argv))


def make_header(
    *,
    started_at: str,
    gpus: Sequence[GpuDevice] = (),
    info: ServerInfo | None = None,
    wsl: bool | None = None,
    extra: Mapping[str, JsonValue] | None = None,
) -> JsonObject:
    """The header line (`started_at`: ISO 8601 UTC, e.g. `2026-11-29T14:02:11Z`)."""
    server = None
    if info is not None:
        server = {
            "argv": mask_argv(info.argv),
            "gpu_memory_utilization": info.budget,
            "max_model_len": info.max_model_len,
            "kv_cache_dtype": info.kv_cache_dtype,
        }
    header: JsonObject = {
        "format": FORMAT,
        "version": VERSION,
        "started_at": started_at,
        "host": {"wsl": wsl},
        "gpus": [{"index": g.index, "name": g.name, "total_bytes": g.total_bytes} for g in gpus],
        "server": server,
    }
    header.update(extra or {})
    return header


def _gpu_line(device: GpuDevice, sample: Sample, first: bool) -> JsonObject:
    split = sample.split if first else None
    line: JsonObject = {
        "index": device.index,
        "used_bytes": device.used_bytes,
        "total_bytes": device.total_bytes,
        "server_bytes": split.server_bytes if split else None,
        "processes": None
        if device.processes is None
        else [process_fields(p) for p in device.processes[:MAX_PROCESSES]],
        "temperature_c": device.temperature_c,
        "sm_clock_mhz": device.sm_clock_mhz,
        "throttle": list(device.throttle),
    }
    if device.memory_kind is not MemoryKind.DEDICATED:
        line["memory_kind"] = device.memory_kind.value
    if device.gtt_used_bytes is not None:
        line["gtt_used_bytes"] = device.gtt_used_bytes
    line.update(card_activity_fields(device))
    if split is not None:  # optional additions: how vramtop divided the card
        line["desktop_bytes"] = split.desktop_bytes
        line["split_method"] = str(split.method)
        if split.headroom_bytes is not None:
            line["headroom_bytes"] = split.headroom_bytes
        if split.server_gtt_bytes is not None:
            line["server_gtt_bytes"] = split.server_gtt_bytes
    return line


def _server_line(sample: Sample) -> JsonObject | None:
    reading, info = sample.server, sample.info
    if reading is None and info is None:
        return None
    out: JsonObject = {}
    if info is not None:
        out["state"] = str(info.state)
        out["pid"] = info.pid
    elif reading is not None:
        out["state"] = str(ServerState.RUNNING if reading.reachable else ServerState.STOPPED)
    if reading is not None:
        out["healthy"] = reading.healthy
        if reading.stale:
            out["stale"] = True
        if reading.not_answering_s is not None:
            out["not_answering_s"] = round(reading.not_answering_s, 1)
    m = reading.metrics if reading is not None and not reading.stale else None
    if m is not None:
        out.update(
            generation_tokens_total=m.generation_tokens_total,
            prompt_tokens_total=m.prompt_tokens_total,
            requests_running=_count(m.requests_running),
            requests_waiting=_count(m.requests_waiting),
            preemptions_total=m.preemptions_total,
            kv_cache_usage=m.kv_cache_usage,
        )
        if m.cache.kv_cache_memory_bytes is not None:
            out["kv_cache_memory_bytes"] = m.cache.kv_cache_memory_bytes
        if m.inter_token_latency_count is not None:  # optional: the decode latency histogram
            out["inter_token_latency_sum_s"] = m.inter_token_latency_sum_s
            out["inter_token_latency_count"] = m.inter_token_latency_count
    tokens = m.cache.kv_cache_size_tokens if m is not None else None
    if tokens is None and sample.startup is not None:
        tokens = sample.startup.kv_cache_tokens
    out["kv_cache_tokens"] = tokens
    util = m.cache.gpu_memory_utilization if m is not None else None
    if util is None and info is not None:
        util = info.budget
    out["gpu_memory_utilization"] = util
    return out


def _count(value: float | None) -> int | float | None:
    """Gauges that count requests are written as integers."""
    if value is None or not math.isfinite(value):
        return None
    return int(value) if value == int(value) else value


def sample_line(sample: Sample) -> JsonObject:
    """A `Sample` as the session format's sample line."""
    line: JsonObject = {
        "t": sample.t,
        "gpus": [_gpu_line(d, sample, i == 0) for i, d in enumerate(sample.gpu.devices)],
        "server": _server_line(sample),
        **windows_sample_fields(sample.windows),
    }
    if sample.gpu.residency_failures is not None:  # optional: WSL2's kernel log was read
        line["residency_failures"] = sample.gpu.residency_failures
    if sample.door is not None:  # optional: the profile's front door answered
        line["door"] = door_json(sample.door)
    return line


def _masked(detail: Mapping[str, JsonValue]) -> JsonObject:
    """An event's detail with every secret masked: argv words, and any text (log lines,
    messages) that carries a key."""
    out = dict(detail)
    for key in ("argv", "old_argv", "new_argv"):
        argv = out.get(key)
        if isinstance(argv, list | tuple):
            out[key] = mask_argv([str(w) for w in argv])
    return {key: _mask_text(value) for key, value in out.items()}


def _mask_text(value: JsonValue) -> JsonValue:
    if isinstance(value, str):
        return mask_line(value)
    if isinstance(value, list | tuple):
        return [_mask_text(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _mask_text(v) for k, v in value.items()}
    return value


def _finite(value: JsonValue) -> JsonValue:
    """NaN and infinities are not JSON: they become null ("not known")."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _dumps(obj: Mapping[str, JsonValue]) -> str:
    try:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        return json.dumps(_finite(obj), ensure_ascii=False, separators=(",", ":"))


class SessionWriter:
    """Writes one session to `path` (0600, never through a link): an existing file is
    truncated, or refused (`FileExistsError`) when not `replace`. Use as a context manager."""

    def __init__(
        self, path: str | Path, header: Mapping[str, JsonValue], *, replace: bool = True
    ) -> None:
        self.path = Path(path)
        header = dict(header)
        header.setdefault("format", FORMAT)
        header.setdefault("version", VERSION)
        server = header.get("server")
        if isinstance(server, Mapping) and "argv" in server:
            argv = server["argv"]
            if isinstance(argv, Sequence):
                header["server"] = {**server, "argv": mask_argv([str(w) for w in argv])}
        if not self.path.parent.is_dir():
            files.private_dir(self.path.parent)
        fd = files.create_new(self.path, replace=replace)
        self._file: IO[str] | None = os.fdopen(fd, "w", encoding="utf-8")
        # Why the recording stopped part-way (a full disk, an I/O error); None while it goes on.
        self.failed: str | None = None
        self._write(header)
        if self.failed is not None:
            raise OSError(f"cannot record to {self.path}: {self.failed}")

    def _write(self, obj: Mapping[str, JsonValue]) -> None:
        if self.failed is not None:
            return  # the recording has failed: said once, nothing more is written
        if self._file is None:
            raise ValueError("session file is closed")
        # One write per complete line, then flush: a crash never leaves half a record
        # behind anything but the very last line.
        try:
            self._file.write(_dumps(obj) + "\n")
            self._file.flush()
        except OSError as exc:
            # A full disk must not stop the live view with it: the recording ends here (its
            # lines so far stay readable) and says why; the caller tells the person.
            self.failed = exc.strerror or str(exc)
            self._drop()

    def _drop(self) -> None:
        """Close the file after a failed write, whose buffered rest cannot be written."""
        file, self._file = self._file, None
        if file is None:
            return
        # (Its buffered rest fails to flush again; the descriptor is closed all the same.)
        with contextlib.suppress(OSError):
            file.close()

    def sample(self, sample: Sample) -> None:
        self._write(sample_line(sample))

    def event(self, t: float, name: str, detail: Mapping[str, JsonValue] | None = None) -> None:
        self._write(Event(t, name, _masked(detail or {})).to_json())

    def finding(self, t: float, finding: Finding, change: str = Change.OPENED) -> None:
        """A `finding` event: the finding as `diagnose --json` prints it, and what changed."""
        self.event(t, EventName.FINDING, {"change": change, **finding.to_json()})

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError as exc:  # the last lines could not be written out
                self.failed = self.failed or exc.strerror or str(exc)
                self._drop()
            self._file = None

    def __enter__(self) -> SessionWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
