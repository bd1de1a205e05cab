"""What the guard does, the command line over the profile's fields, and where its news goes."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vramtop.config import Profile
    from vramtop.notify import Notifier

DEFAULT_SETTLE_S = 300.0


@dataclass(frozen=True)
class GuardSettings:
    """What the guard does, the command line over the profile's fields."""

    notify: tuple[str, ...] | None
    on_finding: str | None
    auto_remedy: bool
    adaptive: bool
    settle_s: float

    @classmethod
    def of(
        cls,
        profile: Profile | None,
        *,
        notify: tuple[str, ...] | None = None,
        on_finding: str | None = None,
        auto_remedy: str | None = None,
        adaptive: bool | None = None,
        settle_s: float | None = None,
    ) -> GuardSettings:
        """The settings asked for on the command line (None: not given), each left out
        taken from `profile`'s fields, else the default."""
        if notify is None and profile is not None and profile.notify is not None:
            notify = tuple(profile.notify)
        auto = auto_remedy or (profile.auto_remedy if profile else "off")
        if adaptive is None:
            adaptive = bool(profile and profile.adaptive)
        if settle_s is None:
            settle_s = profile.settle_s if profile else DEFAULT_SETTLE_S
        return cls(notify, on_finding, auto == "between-turns", adaptive, settle_s)


def guard_notifier(settings: GuardSettings, *, wsl: bool) -> Notifier | str:
    """The Notifier the settings ask for, or the reason it cannot be made (in words). `wsl`:
    the machine guarded is WSL2 (a toast by default there)."""
    from vramtop.notify import notifier_for

    def problem(words: str) -> None:
        print(f"vramtop guard: {words}", file=sys.stderr)

    try:
        return notifier_for(
            list(settings.notify) if settings.notify else None,
            on_finding=settings.on_finding,
            wsl=wsl,
            on_problem=problem,
        )
    except ValueError as exc:
        return str(exc)
