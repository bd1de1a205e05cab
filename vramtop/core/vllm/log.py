"""vLLM's log lines turned into values: startup facts, the periodic stats line, the phase.

vLLM's wording drifts between releases (one line or two for the KV size, `GPU`/`CPU` prefixes,
thousands separators, process tags such as `(EngineCore_DP0 pid=…)`), so every pattern here
looks for the words that carry meaning and ignores the rest: an unrecognised line is simply
not a fact. A line that breaks the startup parser (a number too large for an int, or a bug
here) is skipped and counted (`StartupParser.skipped_lines`), for the monitor to log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from vramtop.core.model import StartupFacts, StatsLine

# `2026-05-01 21:17:44.614 | ` (docker/journald wrappers), then `(EngineCore_DP0 pid=12)`,
# then `INFO 11-29 16:46:47 [core.py:133] ` or uvicorn's `INFO:     `.
_PREFIX = re.compile(
    r"^(?:\d{4}-\d\d-\d\d[T ][\d:.,]+Z?\s*(?:\|\s*)?)?"
    r"(?:\([\w.-]+ pid=\d+\)\s*)?"
    r"(?:(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)"
    r"(?:\s+(?P<when>\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\s+\[[^\]]*\] ?|:\s+))?"
)

NUMBER = r"-?[\d,]*\.?\d+"


def _split(line: str) -> tuple[str | None, str]:
    """The log level (when printed) and the message without vLLM's prefixes."""
    line = line.rstrip("\r\n")
    match = _PREFIX.match(line)
    if match is None:  # cannot happen (everything in the pattern is optional); stay safe
        return None, line
    return match.group("level"), line[match.end() :]


def strip_prefix(line: str) -> str:
    """The message of a vLLM log line, without process tag, level, time and source file."""
    return _split(line)[1]


def to_float(raw: str) -> float | None:
    """A number as vLLM prints it (thousands separators allowed); None when it is not one."""
    try:
        return float(raw.replace(",", ""))
    except ValueError:
        return None


def _int(raw: str) -> int | None:
    value = to_float(raw)
    return None if value is None else int(value)


# --- startup facts ---------------------------------------------------------------------

VERSION_LINES = (
    re.compile(r"\bversion (\d+\.\d+\.\d+[\w.+-]*)\s*$"),  # the banner art's version line
    re.compile(r"vLLM API server version (\d+\.\d+[\w.+-]*)"),
    re.compile(r"Initializing an? (?:V1 )?LLM engine \(v(\d+\.\d+[\w.+-]*)\)"),
)
MODEL_LOADING = re.compile(
    rf"Model loading took ({NUMBER}) GiB(?: memory)? and ({NUMBER}) s(?:econds?)?\b"
)
_OLD_WEIGHTS = re.compile(rf"Loading model weights took ({NUMBER}) GB")
_AVAILABLE_KV = re.compile(rf"Available KV cache memory: ({NUMBER}) GiB")
_KV_SIZE_TEXT = " KV cache size: "
_KV_SIZE = re.compile(rf"\b([A-Z]+){_KV_SIZE_TEXT}([\d,]+) tokens")
_CONCURRENCY = re.compile(rf"Maximum concurrency for ([\d,]+) tokens per request: ({NUMBER})x")
# Both vLLM's start-failed line ("… on startup is less than desired GPU memory utilization
# (0.95, 30.25 GiB)") and 0.28+'s summary ("… on startup. Desired GPU memory utilization is
# (0.93, 29.61 GiB). Actual usage is …"): the only place either is matched.
_FREE_ON_DEVICE = re.compile(
    rf"Free memory on device(?:\s+\S+)?\s*\(\s*({NUMBER})\s*/\s*({NUMBER})\s*GiB\)\s*on startup"
    rf"(?P<short>\s+is less than)?.*?\(\s*({NUMBER})\s*,\s*({NUMBER})\s*GiB\)",
    re.IGNORECASE,
)
_TERMS = {
    "consumed": re.compile(rf"({NUMBER}) GiB for consumed memory"),
    "weights": re.compile(rf"({NUMBER}) GiB for weights?\b"),
    "non_torch": re.compile(rf"({NUMBER}) GiB for non-torch memory"),
    "activation": re.compile(rf"({NUMBER}) GiB for peak activation"),
    "cudagraph": re.compile(rf"({NUMBER}) GiB for CUDAGraph memory"),
}
_EQUIVALENT_TEXT = " is equivalent to "
_EQUIVALENT = re.compile(
    rf"(?:--gpu-memory-utilization=)?({NUMBER}){_EQUIVALENT_TEXT}"
    rf"(?:--gpu-memory-utilization=)?({NUMBER}) without CUDA graph"
)
_LISTENING = r"Starting vLLM (?:API )?server(?: \d+)? on "
_LISTEN = re.compile(rf"{_LISTENING}(\S+?)[.,]?$")

# Errors, most specific first. Each is (kind, pattern); the message is the line's text.
_ERRORS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("out_of_memory", re.compile(r"on startup is less than desired GPU memory", re.I)),
    ("out_of_memory", re.compile(r"OutOfMemoryError|CUDA out of memory")),
    ("out_of_memory", re.compile(r"No available memory for the cache blocks")),
    ("out_of_memory", re.compile(r"larger than the available KV cache memory")),
    ("engine_dead", re.compile(r"EngineDeadError|Engine core initialization failed")),
    ("other", re.compile(r"^(?:[\w.]+\.)?(?:ValueError|RuntimeError): \S")),
)
_EXCEPTION_NAME = re.compile(r"^(?:[\w.]+\.)?\w*Error: ")


def _error(level: str | None, text: str) -> tuple[str, str] | None:
    """(kind, message) when the line reports a startup failure."""
    if level in ("DEBUG", "INFO", "WARNING"):
        # vLLM logs harmless tracebacks (optional imports) at WARNING; failures come as
        # ERROR lines or as raw stderr without a level.
        return None
    for kind, pattern in _ERRORS:
        if pattern.search(text):
            message = _EXCEPTION_NAME.sub("", text.strip(), count=1)
            return kind, message
    return None


def startup_failure(line: str) -> tuple[str, str] | None:
    """(kind, message) when a log line reports why a start failed: vLLM's own words, without
    its prefixes and the exception's class name; None for any other line. The kinds are
    `out_of_memory`, `engine_dead` (a wrapper that only says the engine died: the cause is
    in an earlier line) and `other`."""
    return _error(*_split(line))


def is_more_telling(found: str, known: str | None) -> bool:
    """Whether a failure of kind `found` says more than one of kind `known` seen before:
    anything does beside nothing, and vLLM's own cause beside `engine_dead`, a wrapper
    ("Engine core initialization failed. See root cause above") that may be printed first
    when two processes write to one log."""
    return known is None or (known == "engine_dead" and found != "engine_dead")


@dataclass(frozen=True)
class StartupOom:
    """vLLM's start-failed line: the card had less free memory than the budget asked for."""

    free_gib: float
    total_gib: float
    requested_util: float
    requested_gib: float

    def as_dict(self) -> dict[str, float]:
        return {
            "free_gib": self.free_gib,
            "total_gib": self.total_gib,
            "requested_util": self.requested_util,
            "requested_gib": self.requested_gib,
        }


def parse_startup_oom(line: str) -> StartupOom | None:
    """The numbers of "Free memory on device … is less than desired GPU memory utilization
    (…)"; None for any other line, or one whose numbers are mangled."""
    match = _FREE_ON_DEVICE.search(line)
    if match is None or match.group("short") is None:
        return None
    free, total, util, want = (to_float(match.group(i)) for i in (1, 2, 4, 5))
    if free is None or total is None or util is None or want is None:
        return None
    return StartupOom(free, total, util, want)


class StartupParser:
    """Reads startup facts from log lines as they arrive. The first value seen wins, because
    tensor-parallel workers repeat the same lines."""

    def __init__(self) -> None:
        self._facts = StartupFacts()
        self._weights_part: float | None = None
        self._non_torch_part: float | None = None
        self.skipped_lines = 0  # lines that raised: skipped, counted
        self.last_skipped: str | None = None  # why the last one was skipped, and its start

    @property
    def facts(self) -> StartupFacts:
        return self._facts

    @property
    def complete(self) -> bool:
        """Whether the startup is over: vLLM says where it listens once its engine is up,
        after every fact above (a failed start never gets there)."""
        return self._facts.listen is not None

    def feed(self, line: str) -> None:
        try:
            self._feed(line)
        except Exception as exc:
            # One bad line (or a parser bug) must not stop the console from reading the rest
            # of the log: skip it, and keep why, for the monitor to log.
            self.skipped_lines += 1
            self.last_skipped = f"{type(exc).__name__}: {exc} in {line[:120]!r}"

    def _set(self, **values: Any) -> None:
        fresh = {
            k: v for k, v in values.items() if v is not None and getattr(self._facts, k) is None
        }
        if fresh:
            self._facts = replace(self._facts, **fresh)

    def _feed(self, line: str) -> None:
        level, text = _split(line)
        if not text.strip():
            return
        if self._facts.version is None:
            for pattern in VERSION_LINES:
                if match := pattern.search(text):
                    self._set(version=match.group(1))
                    break
        if match := MODEL_LOADING.search(text):
            self._set(weights_gib=to_float(match.group(1)), load_seconds=to_float(match.group(2)))
        elif match := _OLD_WEIGHTS.search(text):
            self._set(weights_gib=to_float(match.group(1)))
        if match := _AVAILABLE_KV.search(text):
            self._set(available_kv_gib=to_float(match.group(1)))
        # (The two patterns that begin with no fixed text are tried only on a line that has
        # the text they need: trying them at every place of every line was half of reading a
        # busy server's log, whose lines all go through here.)
        if _KV_SIZE_TEXT in text and (match := _KV_SIZE.search(text)):
            self._set(device_kind=match.group(1), kv_cache_tokens=_int(match.group(2)))
        if match := _CONCURRENCY.search(text):
            self._set(
                max_concurrency_len=_int(match.group(1)),
                max_concurrency=to_float(match.group(2)),
            )
        if match := _FREE_ON_DEVICE.search(text):
            self._set(
                startup_free_gib=to_float(match.group(1)),
                startup_total_gib=to_float(match.group(2)),
                requested_budget=to_float(match.group(4)),
                requested_gib=to_float(match.group(5)),
            )
            if match.group("short") is None:
                self._read_terms(text)
        if _EQUIVALENT_TEXT in text and (match := _EQUIVALENT.search(text)):
            current, without = to_float(match.group(1)), to_float(match.group(2))
            if current is not None and without is not None:
                self._set(cudagraph_equivalent_util=(current, without))
        if match := _LISTEN.search(text):
            self._set(listen=match.group(1))
        found = _error(level, text)
        if found is not None and is_more_telling(found[0], self._facts.error_kind):
            self._facts = replace(self._facts, error_kind=found[0], error=found[1])

    def _read_terms(self, text: str) -> None:
        terms = {k: to_float(m.group(1)) for k, p in _TERMS.items() if (m := p.search(text))}
        consumed = terms.get("consumed")
        if consumed is None and "weights" in terms and "non_torch" in terms:
            # 0.28-0.30 printed weights and non-torch memory as separate terms.
            weights, non_torch = terms["weights"], terms["non_torch"]
            if weights is not None and non_torch is not None:
                consumed = round(weights + non_torch, 4)
        self._set(
            consumed_gib=consumed,
            activation_gib=terms.get("activation"),
            cudagraph_gib=terms.get("cudagraph"),
        )


def parse_startup(lines: Iterable[str]) -> StartupFacts:
    parser = StartupParser()
    for line in lines:
        parser.feed(line)
    return parser.facts


# --- a start's figures (`start_phases` puts them together) -----------------------------------

WEIGHTS_TOOK = re.compile(rf"Loading weights took ({NUMBER}) s(?:econds?)?\b")
CHECKPOINT_SIZE = re.compile(rf"Checkpoint size: ({NUMBER}) GiB")
COMPILE_TOTAL = re.compile(rf"torch\.compile takes ({NUMBER}) s in total")
COMPILE_FROM_CACHE = re.compile(r"Directly load the compiled graph|loaded AOT compiled function")
COMPILED_NOW = re.compile(
    r"Compiling a graph for|Compiling model again|saved AOT compiled function"
    r"|Dynamo bytecode transform time"
)
WARMUP_BEGIN = re.compile(r"Warming up model for the compilation")
WARMUP_DONE = re.compile(r"Warming up done")
GRAPHS = re.compile(rf"Graph capturing finished in ({NUMBER}) secs?")
ENGINE_INIT = re.compile(rf"init engine \([^)]*\) took ({NUMBER}) s(?:econds?)?\b")
READY = re.compile(_LISTENING)


def line_time(line: str) -> float | None:
    """When vLLM printed the line, in seconds since the start of a leap year (its prefix
    has month-day and no year); None for a line without vLLM's stamp."""
    match = _PREFIX.match(line)
    when = match.group("when") if match is not None else None
    if when is None:
        return None
    whole, _, fraction = when.partition(".")
    try:
        at = datetime.strptime(f"2000-{whole}", "%Y-%m-%d %H:%M:%S")
    except ValueError:  # (a 02-30 or a 25:00: not a time)
        return None
    return (at - datetime(2000, 1, 1)).total_seconds() + float(f"0.{fraction or 0}")


# --- the periodic stats line ---------------------------------------------------------------

_STATS_TEXT = "Avg prompt throughput: "
_STATS_HEAD = re.compile(
    rf"(?:Engine (\w+): )?{_STATS_TEXT}({NUMBER}) tokens/s, "
    rf"Avg generation throughput: ({NUMBER}) tokens/s"
)
_RUNNING = re.compile(r"\bRunning: (\d+) reqs?")
_WAITING = re.compile(r"\b(?:Waiting|Pending): (\d+) reqs?")
_PREEMPTIONS = re.compile(r"\bPreemptions: (\d+)")
_KV_USAGE = re.compile(rf"\b(?:(\w+) )?KV cache usage: ({NUMBER})%")
# Case matters: "External prefix cache hit rate" (KV connectors) is a different figure.
_PREFIX_HIT = re.compile(rf"\bPrefix cache hit rate: (?:GPU: )?({NUMBER})%")
_PREFIX_HIT_V0 = re.compile(rf"\bGPU prefix cache hit rate: ({NUMBER})%")


def parse_stats_line(line: str) -> StatsLine | None:
    """The `Avg prompt throughput …` line as a value; None for any other line."""
    if _STATS_TEXT not in line:  # (every line of a server's log is asked)
        return None
    return _parse_stats(strip_prefix(line))


def _parse_stats(text: str) -> StatsLine | None:
    head = _STATS_HEAD.search(text)
    running = _RUNNING.search(text)
    waiting = _WAITING.search(text)
    if head is None or running is None or waiting is None:
        return None
    prompt_tps, generation_tps = to_float(head.group(2)), to_float(head.group(3))
    if prompt_tps is None or generation_tps is None:
        return None
    usage: float | None = None
    for match in _KV_USAGE.finditer(text):
        # Older versions print GPU and CPU (swap space) usage; the GPU one is the pool.
        value = to_float(match.group(2))
        if value is not None and (usage is None or match.group(1) != "CPU"):
            usage = value / 100
            if match.group(1) != "CPU":
                break
    hit = _PREFIX_HIT.search(text) or _PREFIX_HIT_V0.search(text)
    hit_rate = to_float(hit.group(1)) if hit else None
    preemptions = _PREEMPTIONS.search(text)
    return StatsLine(
        engine=head.group(1),
        prompt_tps=prompt_tps,
        generation_tps=generation_tps,
        running=int(running.group(1)),
        waiting=int(waiting.group(1)),
        kv_cache_usage=usage,
        preemptions=int(preemptions.group(1)) if preemptions else None,
        prefix_cache_hit_rate=None if hit_rate is None else hit_rate / 100,
    )


# --- the startup phase ---------------------------------------------------------------------


class Phase(StrEnum):
    """How far a start got, in the user's words (also the supervisor's `phase`)."""

    LOADING_WEIGHTS = "loading weights"
    PROFILING = "profiling"
    CAPTURING_GRAPHS = "capturing graphs"
    READY = "ready"
    FAILED = "failed"


_PHASES: tuple[tuple[Phase, re.Pattern[str]], ...] = (
    (
        Phase.READY,
        re.compile(rf"{_LISTENING}|Application startup complete"),
    ),
    (
        Phase.CAPTURING_GRAPHS,
        re.compile(r"Capturing CUDA graphs?|Graph capturing|capturing cudagraph", re.IGNORECASE),
    ),
    (
        Phase.PROFILING,
        re.compile(
            r"Model loading took|Memory profiling takes|[Pp]rofiling|Warming up model"
            r"|Available KV cache memory|KV cache size: "
        ),
    ),
    (
        Phase.LOADING_WEIGHTS,
        re.compile(
            r"Starting to load model|Loading (?:safetensors|pt) checkpoint shards"
            r"|Loading model weights|Loading weights took|Loading weights|Loading model"
        ),
    ),
)


def detect_phase(line: str) -> Phase | None:
    """The startup phase a line announces: loading weights, profiling, capturing graphs,
    ready, or failed; None when the line says nothing about the phase."""
    level, text = _split(line)
    if _error(level, text) is not None:
        return Phase.FAILED
    for phase, pattern in _PHASES:
        if pattern.search(text):
            return phase
    return None


# uvicorn's access lines for the endpoints a monitor polls every second (vramtop's own
# scrapes): `INFO:     127.0.0.1:54788 - "GET /metrics HTTP/1.1" 200 OK`.
_POLL_ACCESS = re.compile(r'"GET /(metrics|health|version|v1/models|ping|load)[ ?/]')


def is_poll_access_line(line: str) -> bool:
    """True for an access-log line of a polled endpoint: noise beside vLLM's own output."""
    return '"GET /' in line and _POLL_ACCESS.search(line) is not None
