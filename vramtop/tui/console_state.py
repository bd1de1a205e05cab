"""What the console shows, as one value: the latest frame and what is said about it.

The App holds one `ConsoleState` and replaces it (never mutates it) on the event loop; the
reader's thread never touches it. The histories the panels draw are not here: each panel
keeps its own, from the frames it is given.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from vramtop.core.model import GpuReading, Rates, Sample, ServerState
from vramtop.machines.interface import Frame

if TYPE_CHECKING:
    # The diagnosis' modules come with the backend: the first frame waits for none of them.
    from vramtop.core.findings import Finding
    from vramtop.core.headroom.terms import HeadroomInputs
    from vramtop.core.server_events import Event

# A result ("simulated call started", "ready in 0.6 s") is news for this long, then it goes:
# left up for minutes it reads as if it were still happening.
RESULT_SHOWN_S = 15.0


def _no_frame() -> Frame:
    return Frame(Sample(t=0.0, gpu=GpuReading(source="none", error="no sample yet")))


@dataclass(frozen=True)
class ConsoleState:
    """The latest frame, where its normal rate came from, and the status line."""

    frame: Frame = field(default_factory=_no_frame)
    sample: Sample | None = None  # None until the first reading is shown
    normal_origin: str | None = None  # 'learned now', 'remembered 2 h ago', …
    activity: str | None = None  # the status line: progress, or the last action's result
    activity_until: float | None = None  # when a result stops being news
    # The result the status line leads with while it is news: what is said after it (a
    # reading that failed) follows it rather than replacing it before it could be read.
    lead: str | None = None
    desktop_peak_bytes: int | None = None  # the desktop's largest share seen this session
    ended: bool = False  # a replay reached the end of its file
    banner_details: bool = False  # the finding banner's ladder, shown on demand (d)
    recording_failed_said: bool = False

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The open findings, the first seen first."""
        return self.frame.findings

    @property
    def events(self) -> tuple[Event, ...]:
        return self.frame.events

    @property
    def headroom_inputs(self) -> HeadroomInputs | None:
        return self.frame.headroom_inputs

    @property
    def normal(self) -> Rates | None:
        return self.frame.normal

    @property
    def server_state(self) -> ServerState | None:
        sample = self.sample
        return sample.info.state if sample and sample.info else None

    def arrived(self, frame: Frame, normal_origin: str | None) -> ConsoleState:
        """This state with `frame` shown."""
        sample = frame.sample
        desktop = sample.split.desktop_bytes if sample.split else None
        peak = self.desktop_peak_bytes
        if desktop is not None:
            peak = max(desktop, peak or 0)
        return replace(
            self, frame=frame, sample=sample, normal_origin=normal_origin, desktop_peak_bytes=peak
        )

    def said(
        self, text: str | None, now: float, *, news: bool = True, after: bool = False
    ) -> ConsoleState:
        """The status line set to `text`; `news` (a result) fades after RESULT_SHOWN_S,
        progress stays. `after`: said after the result the status line leads with while that
        is news ("restarted · reading failed (…)"), not over it, until the result fades; said
        again (a reading that fails each second), it follows the same result."""
        lead = self.lead if self.activity_until is not None and now < self.activity_until else None
        if after and text is not None and lead is not None and text != lead:
            return replace(self, activity=f"{lead} · {text}")
        until = now + RESULT_SHOWN_S if news and text else None
        return replace(self, activity=text, activity_until=until, lead=text if until else None)
