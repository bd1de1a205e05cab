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

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

from vramtop import files, locations
from vramtop.core import bounds
from vramtop.core.bounds import version_problem
from vramtop.core.diagnosis.normal_rate import REMEMBERED, NormalRate

log = logging.getLogger(__name__)

FILE_NAME = "normal_rates.json"
MAX_ENTRIES = 64  # setups remembered; the least recently saved go first
VERSION = 1  # the format written


def default_path() -> Path:
    return locations.state_dir() / FILE_NAME


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

    def _read(self) -> dict[str, object]:
        self._newer = False
        try:
            raw = locations.read_own(self.path, limit=bounds.MAX_SMALL_FILE_BYTES)
            data = json.loads(raw.decode("utf-8"))
        except FileNotFoundError:
            return {}
        except files.NotYours as exc:  # not used; the next save replaces it with one of ours
            log.warning("normal rates not read: %s", exc.strerror)
            return {}
        except (OSError, ValueError, RecursionError):  # (damaged: nested too deeply)
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
        # Whole or not at all, never through a link, readable only by the user.
        files.write_atomic(self.path, text.encode("utf-8"))


def _saved_at(entry: object) -> float:
    value = entry.get("saved_at") if isinstance(entry, dict) else None
    return float(value) if isinstance(value, int | float) else 0.0
