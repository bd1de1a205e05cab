"""Scenarios: when calls happen, what the desktop needs, when the card runs hot — as data.

A scenario is a JSON file (bundled ones live in `scenarios/`, named by their file stem). Times
are simulated seconds since the world started.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vramtop.core.json_types import JsonObject

SCENARIO_DIR = Path(__file__).parent / "scenarios"
CALL_RAMP_UP_S = 4.0


@dataclass(frozen=True)
class DesktopApp:
    """A desktop process: what it holds when idle, and how much a video call adds."""

    name: str
    idle_gib: float
    call_gib: float = 0.0
    # False: the process uses system memory only (unified memory: it counts against the shared
    # pool, but the driver does not list it as a GPU process).
    gpu: bool = True
    # Its name on a Linux desktop, where `name` is a Windows program's (`dwm.exe`): the
    # machine read natively (no --wsl) lists a Linux desktop's processes. None: the same.
    linux_name: str | None = None


@dataclass(frozen=True)
class Window:
    start: float
    end: float

    def contains(self, t: float) -> bool:
        return self.start <= t < self.end


@dataclass(frozen=True)
class HotSpell:
    """A stretch where the card runs hot and the driver throttles its clocks."""

    start: float
    end: float
    temperature_c: int
    sm_clock_mhz: int
    throttle: tuple[str, ...]


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str = ""
    desktop: tuple[DesktopApp, ...] = ()
    calls: tuple[Window, ...] = ()
    hot_spells: tuple[HotSpell, ...] = ()
    # How fast a call's demand appears and goes away (simulated seconds, linear). A video call
    # takes its memory within a few seconds of joining (camera, encoder, decoders).
    call_ramp_up_s: float = CALL_RAMP_UP_S
    call_ramp_down_s: float = 5.0
    # Slow wobble of each desktop app's demand, so graphs look alive (GiB, peak).
    jitter_gib: float = 0.01
    idle_temperature_c: int = 48
    call_temperature_c: int = 56
    sm_clock_mhz: int = 2655
    extra: JsonObject = field(default_factory=dict)

    def call_scheduled(self, t: float) -> bool:
        return any(w.contains(t) for w in self.calls)

    def hot_spell(self, t: float) -> HotSpell | None:
        return next((h for h in self.hot_spells if h.start <= t < h.end), None)


def available() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.json"))


def load(name_or_path: str | Path) -> Scenario:
    """A bundled scenario by name (`field_report`) or a JSON file by path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = SCENARIO_DIR / f"{name_or_path}.json"
    if not path.is_file():
        raise ValueError(f"no scenario {name_or_path!r}; bundled ones: {', '.join(available())}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return from_dict(data, default_name=path.stem)
    except (OSError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"scenario {path.name} is not valid: {exc}") from exc


def from_dict(data: dict[str, Any], default_name: str = "custom") -> Scenario:
    return Scenario(
        name=str(data.get("name", default_name)),
        description=str(data.get("description", "")),
        desktop=tuple(
            DesktopApp(
                str(d["name"]),
                float(d["idle_gib"]),
                float(d.get("call_gib", 0.0)),
                bool(d.get("gpu", True)),
                str(d["linux_name"]) if d.get("linux_name") else None,
            )
            for d in data.get("desktop", [])
        ),
        calls=tuple(Window(float(c["start"]), float(c["end"])) for c in data.get("calls", [])),
        hot_spells=tuple(
            HotSpell(
                float(h["start"]),
                float(h["end"]),
                int(h["temperature_c"]),
                int(h["sm_clock_mhz"]),
                tuple(str(r) for r in h.get("throttle", [])),
            )
            for h in data.get("hot_spells", [])
        ),
        call_ramp_up_s=float(data.get("call_ramp_up_s", CALL_RAMP_UP_S)),
        call_ramp_down_s=float(data.get("call_ramp_down_s", 5.0)),
        jitter_gib=float(data.get("jitter_gib", 0.01)),
        idle_temperature_c=int(data.get("idle_temperature_c", 48)),
        call_temperature_c=int(data.get("call_temperature_c", 56)),
        sm_clock_mhz=int(data.get("sm_clock_mhz", 2655)),
    )
