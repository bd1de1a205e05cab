"""What the server's log says about how far it got and why it stopped.

Uses the log parser (`vramtop.core.vllm_log`) when it knows a line, and a few markers of its
own otherwise, so the supervisor keeps working with log formats the parser has not met yet.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# Phases in the user's words, in the order a start goes through them.
LOADING = "loading"
PROFILING = "profiling"
CAPTURING = "capturing graphs"
READY = "ready"

_PHASE_MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (CAPTURING, re.compile(r"Capturing CUDA graph|Graph capturing|capturing cudagraph", re.I)),
    (
        PROFILING,
        re.compile(r"Memory profiling|profiling run|Available KV cache memory|KV cache size", re.I),
    ),
    (
        LOADING,
        re.compile(
            r"Loading weights|Starting to load model|Loading model|Model loading took", re.I
        ),
    ),
)

_OOM = re.compile(
    r"Free memory on device(?: \S+)? \((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on startup is "
    r"less than desired GPU memory utilization \((?P<util>[\d.]+), (?P<want>[\d.]+) GiB\)"
)
_ENGINE_DEAD = re.compile(r"EngineDeadError|Engine core .*died|EngineCore .*failed", re.I)
_ERROR = re.compile(r"(?:^|\s)(?:\w+Error|\w+Exception): .+|Traceback \(most recent call last\)")


def phase_of(line: str) -> str | None:
    """The startup phase a log line shows, or None."""
    try:
        from vramtop.core import vllm_log

        detect = getattr(vllm_log, "detect_phase", None)
        if detect is not None:
            found = detect(line)
            if found:
                return _phase_word(str(getattr(found, "value", found)))
    except ImportError:
        pass
    for word, pattern in _PHASE_MARKERS:
        if pattern.search(line):
            return word
    return None


def _phase_word(text: str) -> str:
    text = text.lower().replace("_", " ")
    if "graph" in text:
        return CAPTURING
    if "profil" in text or "kv" in text:
        return PROFILING
    if "ready" in text or "serving" in text:
        return READY
    if "load" in text:
        return LOADING
    return text


@dataclass(frozen=True)
class Cause:
    kind: str  # "out_of_memory", "engine_dead", "other"
    message: str  # one sentence for the user
    line: str  # the log line it came from
    largest_fitting_budget: float | None = None


def largest_fitting_budget(free_gib: float, total_gib: float) -> float:
    """The highest --gpu-memory-utilization (2 decimals) that fits the free memory."""
    return math.floor(free_gib / total_gib * 100) / 100


def find_cause(lines: list[str]) -> Cause | None:
    """The recognised reason a start failed or a server died, from its last log lines."""
    for line in lines:
        match = _OOM.search(line)
        if match:
            free, total = float(match["free"]), float(match["total"])
            util, want = float(match["util"]), float(match["want"])
            fits = largest_fitting_budget(free, total)
            return Cause(
                "out_of_memory",
                f"out of memory at startup: budget {util:.2f} needs {want:.2f} GiB but only "
                f"{free:.2f} of {total:.2f} GiB were free; the largest budget that fits now "
                f"is {fits:.2f}",
                line.strip(),
                fits,
            )
    for line in lines:
        if _ENGINE_DEAD.search(line):
            return Cause("engine_dead", "the engine died (EngineDeadError)", line.strip())
    errors = [line for line in lines if _ERROR.search(line) and "Traceback" not in line]
    if errors:
        return Cause("other", errors[-1].strip()[-300:], errors[-1].strip())
    return None
