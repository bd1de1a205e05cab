"""Where `vramtop fleet` reads its boxes: each box's `vramtop export` (`NAME=URL` on the command
line or in config.toml's `[fleet]` table), or one Prometheus server that scrapes them
(`--prometheus URL`, or the table's `prometheus`). Pure: the texts as given go in, the boxes
or a ValueError that says what is wrong (any password masked) come out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Box:
    """One box of the fleet: its name and the URL of its exporter's /metrics."""

    name: str
    url: str


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def parse_box(text: str) -> Box:
    """`NAME=URL` (the URL of a `vramtop export`; without a path, /metrics is read). Raises
    ValueError saying what is wrong (any password in the URL masked)."""
    from vramtop.core.addresses import parse_url
    from vramtop.core.secrets import mask_url

    name, sep, url = text.partition("=")
    name, url = name.strip(), url.strip()
    example = "e.g. desk=http://192.168.1.20:9464"
    if not sep or not name or not url:
        raise ValueError(f"{mask_url(text)!r}: name a box as NAME=URL, {example}")
    if not set(name) <= _NAME_CHARS:
        raise ValueError(f"{name!r}: a box's name is letters, digits, '-', '_' and '.'")
    try:
        parts = parse_url(url)
    except ValueError as exc:
        raise ValueError(f"{name}={mask_url(url)}: {exc}") from None
    if parts.path in ("", "/"):
        url = parts._replace(path="/metrics").geturl()
    return Box(name, url)


def parse_boxes(texts: Iterable[str]) -> list[Box]:
    """Every `NAME=URL`, in order; ValueError on a bad one or a name given twice."""
    boxes: list[Box] = []
    for text in texts:
        box = parse_box(text)
        if any(other.name == box.name for other in boxes):
            raise ValueError(f"{box.name!r} names two boxes: give each box its own name")
        boxes.append(box)
    return boxes


# The `[fleet]` table's one key that is not a box: the Prometheus server to read them through.
PROMETHEUS_KEY = "prometheus"


@dataclass(frozen=True)
class Sources:
    """Where the fleet reads its boxes: their exporters, or one Prometheus server (its URL);
    `said`: which one is used where both were given (None: only one was)."""

    boxes: tuple[Box, ...] = ()
    prometheus: str | None = None
    said: str | None = None


def prometheus_url(text: str, given_as: str = "--prometheus") -> str:
    """The URL of a Prometheus server (its HTTP API is read); ValueError saying what is
    wrong (`given_as`: where it was given), any password masked."""
    from vramtop.core.addresses import parse_url
    from vramtop.core.secrets import mask_url

    try:
        parse_url(text)
    except ValueError as exc:
        raise ValueError(f"{given_as} {mask_url(text)}: {exc}") from None
    return text.strip().rstrip("/")


def sources(
    boxes: Iterable[str], prometheus: str | None, *, given_as: str = "--prometheus"
) -> Sources:
    """The boxes `NAME=URL` and the Prometheus URL, as given; Prometheus is used where both
    are, and `said` says so. ValueError on a bad entry."""
    from vramtop.core.secrets import mask_url

    parsed = tuple(parse_boxes(boxes))
    if prometheus is None:
        return Sources(boxes=parsed)
    url = prometheus_url(prometheus, given_as)
    said = None
    if parsed:
        names = ", ".join(box.name for box in parsed)
        said = (
            f"reading the boxes through Prometheus at {mask_url(url)}; the exporters named "
            f"beside it ({names}) are not read"
        )
    return Sources(prometheus=url, said=said)


def table_sources(table: Mapping[str, str]) -> Sources:
    """The sources a `[fleet]` table of config.toml gives (`NAME = "URL"` per box, and
    `prometheus = "URL"`); ValueError naming the bad entry."""
    boxes = [f"{name}={url}" for name, url in table.items() if name != PROMETHEUS_KEY]
    return sources(boxes, table.get(PROMETHEUS_KEY), given_as=f"{PROMETHEUS_KEY} =")
