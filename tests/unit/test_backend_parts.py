"""The machine behind the console in two narrow parts (machines/interface.py): what a tick
reads (`FrameSource`) and what a person or the guard asks (`ServerControl`). Each consumer
takes the part it needs, so a source of frames and nothing more is enough to export."""

from __future__ import annotations

from vramtop.core.model import GIB, GpuDevice, GpuReading, Sample
from vramtop.core.remedy import FlagChange, RelaunchOrder
from vramtop.export.exporter import Exporter
from vramtop.machines.interface import Backend, Frame, FrameSource, ServerControl
from vramtop.machines.replay_backend import ReplayBackend

CARD = GpuReading(devices=(GpuDevice(0, "sim card", 32 * GIB, 10 * GIB, 22 * GIB),), source="sim")


def _members(part: type) -> set[str]:
    return {name for name in vars(part) if not name.startswith("_")}


def test_the_two_parts_are_narrow_and_apart() -> None:
    frames, control = _members(FrameSource), _members(ServerControl)
    assert "tick" in frames and {"start", "stop", "restart", "relaunch"} <= control
    assert not frames & control, "a member belongs to one part"
    # (control: the actions, and what a person's relaunch reads of the profile)
    assert len(frames) <= 8 and len(control) <= 12, (sorted(frames), sorted(control))
    assert _members(Backend) == {"close"}, "the console's backend is the two parts, and leaving"


def test_what_a_watched_machine_answers_is_listed_once() -> None:
    """A machine vramtop only watches (a recording) answers each member of the server control
    with the part's own refusal: the members are listed in one place, the part."""
    # (a recording's backend words its own reason; every answer is the part's)
    assert _members(ReplayBackend) & _members(ServerControl) == {"cannot_act"}

    class Watched(ServerControl):
        """What a recording's backend takes: the part's own answers."""

    watched = Watched()
    assert not watched.can_act and not watched.relaunch(RelaunchOrder(FlagChange(0.8))).ok
    assert watched.stop().message == watched.cannot_act


class Ticks:
    """A source of frames and nothing more: no actions, no diagnosis to ask."""

    demo = False
    recorded = False
    wsl = None
    profile_name = None
    finished = False
    session = None

    def tick(self, log_limit: int = 0) -> Frame:
        return Frame(Sample(t=1.0, gpu=CARD), outside_budget_bytes=GIB // 2)


def test_a_frame_source_is_all_the_exporter_asks_for() -> None:
    exporter = Exporter(Ticks(), interval_s=1.0)
    exporter.sample_once()
    text = "".join(
        f"{s.name}{s.labels}={s.value}\n"
        for family in exporter.registry().collect()
        for s in family.samples
    )
    assert "vramtop_samples_total{}=1.0" in text
    assert "vramtop_scrape_errors_total{'source': 'sampler'}=0.0" in text, text
