"""The way back after a call: once the server runs below the profile's launch budget and the
desktop is back within what that budget leaves it, held for the settle time (the adaptive
guard's own rule, core/guard/adaptive.py's `Settling`), the console offers the launch budget
again on its status line, and `b` opens the budget dialog at it. Not while an adaptive guard
acts for the profile: that guard steps back up itself."""

from __future__ import annotations

from dataclasses import dataclass, replace

from vramtop.core.guard.adaptive import SAME_UTIL, SETTLE_S, Settling, desktop_rising
from vramtop.core.guard.decisions import Moment
from vramtop.core.headroom.calculator import predict
from vramtop.core.headroom.terms import HeadroomError, HeadroomInputs
from vramtop.core.model import Sample
from vramtop.core.remedy import FlagChange


@dataclass(frozen=True)
class WayBackOffer:
    """The profile's flags to go back to (its budget, and its --max-model-len where it differs
    from the server's now), and the KV tokens they give (None: not known)."""

    flags: FlagChange
    budget: float
    kv_tokens_gained: int | None

    def words(self, key: str) -> str:
        gives = [f"+{self.kv_tokens_gained:,} KV tokens"] if self.kv_tokens_gained else []
        if self.flags.max_model_len is not None:
            gives.append(f"--max-model-len {self.flags.max_model_len:,}")
        said = f" ({', '.join(gives)})" if gives else ""
        # Short: it shares the status line with the server's state at 120 columns.
        return f"call over: {key} relaunches at {self.budget:.2f}{said}"


class WayBack:
    """Follows the frames; says when the way back is to be offered."""

    def __init__(self, settle_s: float = SETTLE_S) -> None:
        self._settling = Settling(settle_s)

    def offer(
        self,
        s: Sample,
        launch: FlagChange | None,
        inputs: HeadroomInputs | None,
        guard_adaptive: bool,
    ) -> WayBackOffer | None:
        """The offer at this frame (None: none). `guard_adaptive`: an adaptive guard acts for
        the profile. `launch`: the profile's own flags."""
        m = Moment.of(s)
        launch_budget = launch.budget if launch is not None else None
        if (
            guard_adaptive
            or launch_budget is None
            or not m.serving
            or m.budget is None
            or m.budget >= launch_budget - SAME_UTIL
            or m.desktop is None
        ):
            self._settling.reset()
            return None
        allowance = m.headroom_at(launch_budget)
        if allowance is None:
            self._settling.reset()
            return None
        if not self._settling.settled(m.t, desktop_rising(m.desktop, allowance)):
            return None
        length = launch.max_model_len if launch is not None else None
        if inputs is not None and length == inputs.max_model_len:
            length = None  # the server runs with it already
        flags = FlagChange(launch_budget, length)
        return WayBackOffer(flags, launch_budget, _gained(inputs, m.budget, flags))


def _gained(inputs: HeadroomInputs | None, now: float, back: FlagChange) -> int | None:
    """The KV tokens the server gains at `back` (its --max-model-len too) over `now`."""
    if inputs is None or back.budget is None:
        return None
    after = (
        inputs if back.max_model_len is None else replace(inputs, max_model_len=back.max_model_len)
    )
    try:
        return predict(after, back.budget).kv_cache_tokens - predict(inputs, now).kv_cache_tokens
    except HeadroomError:
        return None
