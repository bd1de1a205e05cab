"""A series as `vramtop export` exposes it: a metric's name, its labels and one value, and
the one rule every series is added by (an unknown value is an absent series, never a zero)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Series:
    name: str
    value: float
    labels: tuple[tuple[str, str], ...] = ()

    def label(self, name: str) -> str | None:
        return dict(self.labels).get(name)


def add(out: list[Series], metric: str, value: float | None, /, **labels: str) -> None:
    if value is not None and math.isfinite(value):
        out.append(Series(metric, float(value), tuple(labels.items())))
