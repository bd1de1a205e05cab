"""The banner across the top when a finding is open: what, why, and the keys that fix it."""

from __future__ import annotations

from typing import Any

from textual.content import Content
from textual.widgets import Static

from vramtop.tui.format import field


class FindingBanner(Static):
    DEFAULT_CSS = """
    FindingBanner {
        display: none; height: auto; padding: 0 1;
        background: $error-muted; border-left: thick $error;
    }
    FindingBanner.-open { display: block; }
    FindingBanner.-short { text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def show(self, findings: list[Any], *, short: bool = False) -> None:
        """`short`: one line for the whole ladder (small terminals keep room for the panels)."""
        if not findings:
            if self.has_class("-open"):
                self.remove_class("-open")
            return
        self.set_class(True, "-open")
        self.set_class(short, "-short")
        self.update(banner_text(findings[0], more=len(findings) - 1, short=short))


def banner_text(finding: Any, more: int = 0, short: bool = False) -> Content:
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
                parts += [" → " if index else "", (f"{name}: ", "bold"), str(text)]
        else:
            for name, text in steps:
                parts += ["\n", (f"{name}: ", "bold"), str(text)]
    parts += ["\n", *remedy_keys(field(finding, "remedy"))]
    return Content.assemble(*parts)


def remedy_keys(remedy: Any) -> list[str | tuple[str, str]]:
    util = field(remedy, "gpu_memory_utilization")
    keys: list[str | tuple[str, str]] = [("r", "bold reverse"), " restart now"]
    if util is not None:
        keys += ["   ", ("b", "bold reverse"), f" relaunch at {float(util):.2f}"]
    else:
        keys += ["   ", ("b", "bold reverse"), " relaunch with another budget"]
    keys += ["   ", ("e", "bold reverse"), " timeline"]
    return keys
