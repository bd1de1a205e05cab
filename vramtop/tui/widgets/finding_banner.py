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
    """

    def show(self, findings: list[Any]) -> None:
        if not findings:
            self.set_class(False, "-open")
            return
        self.set_class(True, "-open")
        self.update(banner_text(findings[0], more=len(findings) - 1))


def banner_text(finding: Any, more: int = 0) -> Content:
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
