"""The banner across the top when a finding is open: what, why, and the keys that fix it."""

from __future__ import annotations

from typing import Any

from textual.content import Content
from textual.widgets import Static

from vramtop.core.windows import SYSMEM_FALLBACK_ADVICE
from vramtop.tui.format import field


class FindingBanner(Static):
    _shown: Content | None = None
    DEFAULT_CSS = """
    FindingBanner {
        display: none; height: auto; padding: 0 1;
        background: $error-muted; border-left: thick $error;
    }
    FindingBanner.-open { display: block; }
    FindingBanner.-short { text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def show(self, findings: list[Any], *, short: bool = False, can_act: bool = True) -> None:
        """`short`: one line for the whole ladder (small terminals keep room for the panels).

        `can_act`: False when watching only (a recording, a URL): the remedy is said, but
        no key is offered for it, since r and b do nothing there.
        """
        if not findings:
            if self.has_class("-open"):
                self.remove_class("-open")
            return
        self.set_class(True, "-open")
        self.set_class(short, "-short")
        text = banner_text(findings[0], more=len(findings) - 1, short=short, can_act=can_act)
        if self._shown is None or not self._shown.is_same(text):
            # Only on change: an update lays the whole screen out again (the banner's height
            # follows its text), and a finding stays open for many ticks.
            self._shown = text
            self.update(text)


def banner_text(finding: Any, more: int = 0, short: bool = False, can_act: bool = True) -> Content:
    kind = str(field(finding, "kind", "finding"))
    parts: list[str | tuple[str, str]] = [
        (f"⚠ {kind}", "bold $error"),
        f"  {field(finding, 'summary', '')}",
    ]
    if more:
        parts.append((f"  (+{more} more: e)", "$text-muted"))
    ladder = field(finding, "ladder")
    if ladder:
        steps = [
            (name, field(ladder, name))
            for name in ("observed", "inferred", "hypothesis")
            if field(ladder, name)
        ]
        if short:
            parts.append("\n")
            for index, (name, text) in enumerate(steps):
                parts += [" → " if index else "", (f"{name}: ", "bold"), _sentences(text)]
        else:
            for name, text in steps:
                parts += ["\n", (f"{name}: ", "bold"), _sentences(text)]
    parts += ["\n", *remedy_keys(field(finding, "remedy"), can_act=can_act)]
    evidence = field(finding, "evidence") or {}
    if not short and field(evidence, "wsl_vm_shared_rise_bytes"):
        # A spill was observed on the Windows side: the driver setting that may prevent it.
        parts += ["\n", ("spill: ", "bold"), SYSMEM_FALLBACK_ADVICE]
    return Content.assemble(*parts)


def _sentences(text: Any) -> str:
    """A ladder rung is a list of sentences (or one string): joined as the report writes it."""
    if isinstance(text, list | tuple):
        return "; ".join(str(t) for t in text)
    return str(text)


def remedy_keys(remedy: Any, can_act: bool = True) -> list[str | tuple[str, str]]:
    util = field(remedy, "gpu_memory_utilization")
    why = field(remedy, "why")
    keys: list[str | tuple[str, str]] = []
    if why:
        keys += [("remedy: ", "bold"), f"{why}\n"]
    if not can_act:
        return [*keys, ("e", "bold reverse"), " timeline"]
    keys += [("r", "bold reverse"), " restart now"]
    if util is not None:
        keys += ["   ", ("b", "bold reverse"), f" relaunch at {float(util):.2f}"]
    else:
        keys += ["   ", ("b", "bold reverse"), " relaunch with another budget"]
    keys += ["   ", ("e", "bold reverse"), " timeline"]
    return keys
