"""A start's phases as vLLM's own log tells them: the weights loaded (GiB, seconds, GB/s),
the compilation and the graph capture where vLLM prints them, the engine's set-up, and the
time from the log's first line to ready by the log's own clock.

Each figure is vLLM's own words where it says one (`Loading weights took 38.20 seconds`,
`Model loading took 18.90 GiB memory and 41.20 seconds`, `torch.compile takes 43.1 s in
total`, `Graph capturing finished in 31 secs`, `init engine (...) took 49.80 seconds`). The
CPU build says no compile total: there the compilation is the time between its `Warming up
model for the compilation...` and `Warming up done.` lines, by their timestamps (whole
seconds). A figure the log does not give is None. Pure: lines in, a value out; the lines'
patterns are `core.vllm.log`'s, the one place vLLM's words are matched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from vramtop.core.json_types import JsonObject
from vramtop.core.vllm import log as vllm_log
from vramtop.core.vllm.log import line_time, strip_prefix, to_float

GIB_IN_GB = 2**30 / 1e9
# A year of seconds as `line_time` counts them (from a leap year's start).
_YEAR_S = 366 * 86400


@dataclass(frozen=True)
class StartPhases:
    """One start's phases in seconds (None: the log did not say)."""

    weights_gib: float | None = None
    weights_s: float | None = None
    compile_s: float | None = None
    # Whether the compiled graphs came from vLLM's cache (None: the log did not say).
    compile_cached: bool | None = None
    graphs_s: float | None = None
    engine_init_s: float | None = None
    # From the log's first timestamped line to vLLM's "Starting vLLM server on".
    to_ready_s: float | None = None

    @property
    def weights_gb_per_s(self) -> float | None:
        """How fast the weights came from disk (GB/s), where both figures are known."""
        if self.weights_gib is None or not self.weights_s:
            return None
        return self.weights_gib * GIB_IN_GB / self.weights_s

    def fields(self) -> JsonObject:
        """The known figures, as a step's event carries them (rounded)."""
        values: dict[str, float | bool | None] = {
            "weights_gib": self.weights_gib,
            "weights_s": self.weights_s,
            "weights_gb_per_s": self.weights_gb_per_s,
            "compile_s": self.compile_s,
            "compile_cached": self.compile_cached,
            "graphs_s": self.graphs_s,
            "engine_init_s": self.engine_init_s,
            "to_ready_s": self.to_ready_s,
        }
        return {
            k: (round(v, 3) if isinstance(v, float) else v)
            for k, v in values.items()
            if v is not None
        }


def _between(start: float | None, end: float | None) -> float | None:
    """`end - start`; one over the new year (December to January) counted so."""
    if start is None or end is None:
        return None
    took = end - start
    return took + _YEAR_S if took < 0 else took


def _number(pattern: re.Pattern[str], text: str, group: int = 1) -> float | None:
    match = pattern.search(text)
    return None if match is None else to_float(match.group(group))


# The figures said in one line each, by the name they are kept under.
_SAID = (
    ("weights_s", vllm_log.WEIGHTS_TOOK),
    ("checkpoint_gib", vllm_log.CHECKPOINT_SIZE),
    ("compile_s", vllm_log.COMPILE_TOTAL),
    ("graphs_s", vllm_log.GRAPHS),
    ("engine_init_s", vllm_log.ENGINE_INIT),
)


def parse_start_phases(lines: Iterable[str]) -> StartPhases:
    """The phases of the start the lines are the log of (give one start's lines: see
    `log_run.last_run`). A line said again (vLLM's workers each print theirs) keeps its
    first figure."""
    found: dict[str, float | None] = {}
    first_at = warmup_at = ready_at = None
    warmup_s: float | None = None
    cached: bool | None = None
    for line in lines:
        at = line_time(line)
        if first_at is None:
            first_at = at
        text = strip_prefix(line)
        if (match := vllm_log.MODEL_LOADING.search(text)) is not None:
            found.setdefault("weights_gib", to_float(match.group(1)))
            found.setdefault("model_loading_s", to_float(match.group(2)))
        for key, pattern in _SAID:
            if key not in found and (value := _number(pattern, text)) is not None:
                found[key] = value
        if cached is None and vllm_log.COMPILE_FROM_CACHE.search(text):
            cached = True
        elif cached is None and vllm_log.COMPILED_NOW.search(text):
            cached = False
        if vllm_log.WARMUP_BEGIN.search(text):
            warmup_at = at
        elif vllm_log.WARMUP_DONE.search(text) and warmup_s is None:
            warmup_s = _between(warmup_at, at)
        if ready_at is None and vllm_log.READY.search(text):
            ready_at = at
    weights_gib = found.get("weights_gib")
    if weights_gib is None:
        weights_gib = found.get("checkpoint_gib")
    weights_s = found.get("weights_s")
    if weights_s is None:
        weights_s = found.get("model_loading_s")
    compile_s = found.get("compile_s")
    return StartPhases(
        weights_gib=weights_gib,
        weights_s=weights_s,
        compile_s=compile_s if compile_s is not None else warmup_s,
        compile_cached=cached,
        graphs_s=found.get("graphs_s"),
        engine_init_s=found.get("engine_init_s"),
        to_ready_s=_between(first_at, ready_at),
    )
