"""Normal rates remembered between runs, in the state directory.

One small JSON file (`normal_rates.json`, readable only by the user) maps what decides a
server's decode speed (`core.normal_rate.decode_key`: profile, model, card, quantization, KV
cache dtype, tensor parallel) to the normal learned for it and when. A console opened in the
middle of a collapse then compares with the speed of the last run instead of learning the
collapse as normal. A damaged or unreadable file is ignored (a remembered rate only helps),
and so is one whose format `version` is not a whole number; one of a newer format is neither
read nor replaced (a newer vramtop wrote it).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vramtop.core.bounds import version_problem
from vramtop.core.diagnosis.normal_rate import REMEMBERED, NormalRate

log = logging.getLogger(__name__)

FILE_NAME = "normal_rates.json"
MAX_ENTRIES = 64  # setups remembered; the least recently saved go first
VERSION = 1  # the format written


def default_path() -> Path:
    from vramtop.locations import state_dir

    return state_dir() / FILE_NAME


class NormalRateStore:
    def __init__(self, path: Path | None = None, clock: Callable[[], float] = time.time) -> None:
        self._path = path
        self._clock = clock
        self._newer = False  # the file read last is of a newer format

    @property
    def path(self) -> Path:
        if self._path is None:
            self._path = default_path()
        return self._path

    def load(self, key: str) -> NormalRate | None:
        """The normal remembered for `key` (source `remembered`, with when it was saved)."""
        entry = self._read().get(key)
        rate = NormalRate.from_json(entry, source=REMEMBERED)
        return None if rate is None else NormalRate(rate.by_measure, REMEMBERED, rate.saved_at, key)

    def save(self, key: str, rate: NormalRate) -> None:
        """Remember `rate` for `key`, stamped now. Failures are logged, never raised."""
        entries = self._read()
        if self._newer:
            return  # a newer vramtop's file: kept as it is (`_read` said so)
        entries.pop(key, None)
        others = sorted(entries.items(), key=lambda kv: _saved_at(kv[1]), reverse=True)
        newest = [(key, {**rate.to_json(), "key": key, "saved_at": self._clock()}), *others]
        data = {"version": VERSION, "rates": dict(newest[:MAX_ENTRIES])}
        try:
            self._write(json.dumps(data, indent=1))
        except OSError as exc:
            log.warning("could not remember the normal rate in %s: %s", self.path, exc)

    def _read(self) -> dict[str, Any]:
        self._newer = False
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        problem = version_problem(data, VERSION) if isinstance(data, dict) else None
        if problem is not None:
            version = data.get("version")
            self._newer = type(version) is int and version > VERSION
            log.warning("%s: %s; its normal rates are not used", self.path, problem)
            return {}
        rates = data.get("rates") if isinstance(data, dict) else None
        return dict(rates) if isinstance(rates, dict) else {}

    def _write(self, text: str) -> None:
        # Whole or not at all: a new file beside the old one, readable only by the user,
        # renamed over it.
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise


def _saved_at(entry: Any) -> float:
    value = entry.get("saved_at") if isinstance(entry, dict) else None
    return float(value) if isinstance(value, int | float) else 0.0
