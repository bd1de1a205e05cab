"""One line of a Prometheus text page read into its samples (name, labels, value), quickly
for the plain shape every vLLM page uses and by prometheus_client for anything else. What
the samples mean to vramtop is `metrics`.

Parsed by hand beside prometheus_client (which the exporter uses) because its parser takes
~32 ms of CPU for vLLM's 50 KB page, read every second, against ~0.13 ms here
(`python -m bench.bench_parse`, both in one run).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

# A series in the plain shape (see `_plain_series`): legacy name, `label="value"` pairs with
# only the escapes \\, \" and \n, an optional trailing comma.
_LABEL_TEXT = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\n"])*"'
_PLAIN_SERIES = re.compile(
    rf"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{{((?:{_LABEL_TEXT})(?:,{_LABEL_TEXT})*,?)?\}})?"
)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\n"])*)"')
_ESCAPE = re.compile(r'\\[\\n"]')
_ESCAPES = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
# One sample as the parser gave it: name, labels in page order, value.
PageSample = tuple[str, tuple[tuple[str, str], ...], float]


def _families(text: str) -> Iterable[object]:
    # Imported on first use: the parser is pure text handling, but importing any part of
    # prometheus_client runs its package __init__, which loads its HTTP exporter (socket,
    # http.server). The core must stay importable without I/O modules.
    from prometheus_client.parser import text_string_to_metric_families

    return text_string_to_metric_families(text)


def read_samples(line: str) -> tuple[PageSample, ...] | None:
    """The sample on one line: its series read once by the library, its value each time.

    A series (name and labels, the text before the value) stays the same from one scrape to
    the next while its value moves, and its labels are most of the parsing: the library
    reads them a character at a time. Anything but the plain `series value [timestamp]`
    shape goes to the library whole. None: a line the library cannot read."""
    if " # " not in line:  # (an exemplar has braces of its own)
        close = line.rfind("}")
        if close >= 0:
            series, rest = line[: close + 1], line[close + 1 :]
        else:
            series, _, rest = line.partition(" ")
        fields = rest.split()
        if series and 1 <= len(fields) <= 2 and "_" not in fields[0]:
            known = _series(series)
            if known is not None:
                value = _value(fields[0])
                return None if value is None else ((known[0], known[1], value),)
    return _read_line(line)


def _value(text: str) -> float | None:
    # As the library reads a value: an integer when it is one, else a float.
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None


@functools.lru_cache(maxsize=256)
def _series(series: str) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    plain = _plain_series(series)
    if plain is not None:
        return plain
    # The library must take the value from what follows the series: text such as `: 0 }`
    # holds a value of its own (the library reads `: 0 } 7` as 0), and is left to it whole.
    read, other = _read_line(series + " 0"), _read_line(series + " 1")
    if read is None or other is None or len(read) != 1 or len(other) != 1:
        return None
    if read[0][2] != 0 or other[0][2] != 1 or read[0][:2] != other[0][:2]:
        return None
    return read[0][0], read[0][1]


def _plain_series(series: str) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    """A series in the plain shape every vLLM page uses (`name{label="value",…}`: legacy
    names, quoted values with the format's three escapes), read as the library reads it; None
    for anything else, which the library then reads. Importing the library (its package
    brings its HTTP exporter) costs more CPU than a one-shot answer's whole parse."""
    match = _PLAIN_SERIES.fullmatch(series)
    if match is None:
        return None
    name, body = match.group(1), match.group(2)
    if not body:
        return name, ()
    labels = tuple(
        (label, _ESCAPE.sub(lambda m: _ESCAPES[m.group(0)], value))
        for label, value in _LABEL.findall(body)
    )
    names = [label for label, _ in labels]
    if len(set(names)) != len(names) or any(n.startswith("__") for n in names):
        return None  # the library refuses or treats them apart: let it say
    return name, labels


@functools.lru_cache(maxsize=8)
def read_samples_kept(line: str) -> tuple[PageSample, ...] | None:
    """The samples on one vllm:cache_config_info line, kept while the line stays the same.

    Its ~40 labels would be most of a tick's parsing, yet the line does not change while a
    server runs. Keyed by the exact text, so a restarted server's new line is read anew; a
    few entries cover data-parallel engines (a line each) and a restart's old and new lines."""
    return read_samples(line)


def _read_line(line: str) -> tuple[PageSample, ...] | None:
    """The samples on one line, as the library reads them; None when it cannot (a damaged
    or cut-off line: the library raises ValueError, or on some damage TypeError/IndexError)."""
    try:
        return tuple(
            (sample.name, tuple(sample.labels.items()), sample.value)
            for family in _families(line + "\n")
            for sample in family.samples  # type: ignore[attr-defined]
        )
    except (ValueError, TypeError, IndexError, KeyError):
        return None
