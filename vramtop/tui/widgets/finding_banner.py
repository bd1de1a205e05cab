"""The banner across the top when a finding is open: what, why, and the keys that fix it.

Compact by default (the headline in words, the evidence in a sentence, the remedy keys): it opens
at the very moment the panels below it matter. `d` (or a click) opens the details: the
finding's id, its evidence ladder and the remedy's reasoning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.events import Click
from textual.message import Message
from textual.widgets import Static

if TYPE_CHECKING:
    # Imported once there is a finding to show (banner_text): the console's first frame has
    # none, and waits for every module imported before it.
    from vramtop.core.diagnosis.throughput import ThroughputView
    from vramtop.core.findings import Finding, Ladder, Remedy

Part = str | tuple[str, str]
# The keys the banner names, by binding id, as shown (the console passes its keymap's).
# A remedy no key can carry out: the profile's launch command cannot run (launch_failed).
FIX_PROFILE = "fix_profile"
DEFAULT_KEYS: Mapping[str, str] = {"restart": "r", "relaunch": "b", "details": "d", "timeline": "e"}


class FindingBanner(VerticalScroll, can_focus=False):
    """A scrolling box around the banner's text: details longer than its room scroll, with
    the arrows and the page keys once it has the focus (the console gives it while they
    are open and do not fit; else it takes none, the log keeps it)."""

    _shown: Content | None = None
    DEFAULT_CSS = """
    FindingBanner {
        display: none; height: auto; max-height: 60%; padding: 0 1;
        background: $error-muted; border-left: thick $error;
        scrollbar-size-vertical: 1;
    }
    FindingBanner > Static { height: auto; }
    FindingBanner.-open { display: block; }
    """

    def compose(self) -> ComposeResult:
        yield Static()

    def update(self, text: Content) -> None:
        """The banner's text (wrapped to its width)."""
        self.query_one(Static).update(text)

    @property
    def text(self) -> str:
        """What the banner says, as plain text ("" while no finding was shown)."""
        return self._shown.plain if self._shown is not None else ""

    class Toggled(Message):
        """The banner was clicked: open or close its details."""

    def on_click(self, event: Click) -> None:
        event.stop()
        self.post_message(self.Toggled())

    def show(
        self,
        findings: Sequence[Finding],
        *,
        details: bool = False,
        short: bool = False,
        can_act: bool = True,
        keys: Mapping[str, str] = DEFAULT_KEYS,
        throughput: ThroughputView | None = None,
        now: float | None = None,
    ) -> None:
        """`details`: the evidence ladder and the finding's id too (else the compact form).

        `short`: with details, the whole ladder as one paragraph (small terminals keep room
        for the panels). Every line wraps, never cut: a finding's words are all on screen,
        and a banner taller than half the screen scrolls.

        `can_act`: False when watching only (a recording, a URL): the remedy is said, but
        no key is offered for it, since r and b do nothing there.

        `keys`: the key of each binding the banner names (restart, relaunch, details,
        timeline), as the keymap has them.

        `throughput`: the frame's throughput view, whose per-request rate and normal a
        collapse's or a slowdown's words give (the figures the throughput panel shows).

        `now`: the frame's time, in the samples' clock: numbers its rule has not refreshed
        for a while are told with their age.
        """
        if not findings:
            if self.has_class("-open"):
                self.remove_class("-open")
            return
        self.set_class(True, "-open")
        text = banner_text(
            findings[0],
            more=len(findings) - 1,
            details=details,
            short=short,
            can_act=can_act,
            keys=keys,
            throughput=throughput,
            now=now,
        )
        if self._shown is None or not self._shown.is_same(text):
            # Only on change: an update lays the whole screen out again (the banner's height
            # follows its text), and a finding stays open for many ticks.
            self._shown = text
            self.update(text)


def banner_text(
    finding: Finding,
    more: int = 0,
    details: bool = False,
    short: bool = False,
    can_act: bool = True,
    keys: Mapping[str, str] = DEFAULT_KEYS,
    throughput: ThroughputView | None = None,
    now: float | None = None,
) -> Content:
    from vramtop.core.diagnosis.throughput import summary_now
    from vramtop.core.findings import headline
    from vramtop.core.windows.prose import SYSMEM_FALLBACK_ADVICE

    key = {**DEFAULT_KEYS, **keys}
    parts: list[Part] = [(f"⚠ {headline(finding.kind)}", "bold $error")]
    note = confidence_note(finding)
    if note:
        parts.append((f"  ({note})", "bold"))
    age = finding.numbers_age_s(now) if now is not None else None
    if age is not None:
        parts.append((f"  (numbers as of {age:.0f} s ago)", "$text-muted"))
    if more:
        parts.append((f"  (+{more} more: {key['timeline']})", "$text-muted"))
    parts += ["\n", summary_now(finding, throughput)]
    if details:
        parts += ["\n", ("finding: ", "bold"), finding.kind]
        if finding.severity:
            parts.append(f" · {finding.severity}")
        parts += _ladder(finding.ladder, short)
        if finding.remedy.why:
            parts += ["\n", ("remedy: ", "bold"), finding.remedy.why]
    parts += ["\n", *remedy_keys(finding.remedy, can_act=can_act, details=details, keys=key)]
    if details and not short and finding.evidence.spill_rise_bytes:
        # A spill was observed on the Windows side: the driver setting that may prevent it.
        parts += ["\n", ("spill: ", "bold"), SYSMEM_FALLBACK_ADVICE]
    return Content.assemble(*parts)


def confidence_note(finding: Finding) -> str | None:
    """How sure the finding is, when it says it is less than sure (e.g. raised before a
    normal rate was learned): kept in the compact form, where the ladder is not shown."""
    confidence = finding.confidence
    if confidence is None or confidence == "high":
        return None
    # A level ("low") reads "low confidence"; a phrase ("memory evidence, no normal rate")
    # is shown as it is.
    return f"{confidence} confidence" if " " not in confidence else confidence


def _ladder(ladder: Ladder, short: bool) -> list[Part]:
    parts: list[Part] = []
    if short:
        if ladder.rungs():
            parts.append("\n")
        for index, (name, sentences) in enumerate(ladder.rungs()):
            parts += [" → " if index else "", (f"{name}: ", "bold"), "; ".join(sentences)]
    else:
        for name, sentences in ladder.rungs():
            parts += ["\n", (f"{name}: ", "bold"), "; ".join(sentences)]
    return parts


def remedy_keys(
    remedy: Remedy,
    can_act: bool = True,
    details: bool = False,
    keys: Mapping[str, str] = DEFAULT_KEYS,
) -> list[Part]:
    key = {**DEFAULT_KEYS, **keys}
    util = remedy.budget
    flags = "" if util is None else f"{util:.2f}"
    gap = "   "
    if util is not None and remedy.max_model_len is not None:
        # The budget's pool cannot hold the current ceiling: the relaunch lowers it too. The
        # line then keeps every key within 80 columns with narrower gaps.
        flags += f", max-model-len {remedy.max_model_len:,}"
        gap = "  "
    parts: list[Part] = []
    if remedy.action == FIX_PROFILE:
        # The launch command cannot run: no key of the console can help, the profile can.
        parts.append("remedy: fix the profile's command (vramtop doctor)   ")
    elif can_act:
        if not remedy.restart_fails:
            # After a start that failed for memory a restart at that budget fails again.
            parts += [(key["restart"], "bold reverse"), f" restart now{gap}"]
        if util is not None:
            parts += [(key["relaunch"], "bold reverse"), f" relaunch at {flags}{gap}"]
        else:
            parts += [(key["relaunch"], "bold reverse"), " relaunch with another budget   "]
    elif util is not None:
        # Nothing can be acted on here, but the fix is still worth saying.
        parts.append(f"remedy: relaunch at {flags}{gap}")
    parts += [
        (key["details"], "bold reverse"),
        f" fewer details{gap}" if details else f" details{gap}",
    ]
    parts += [(key["timeline"], "bold reverse"), " events"]
    return parts
