"""What vramtop tells a person away from the console: a finding that opened or closed, an
action taken for them, in a title and a body that lead with words.

Pure: the senders (`vramtop/notify/`) deliver a `News`; its `key` says which news it is, so
that the same news twice in a row is sent once (a finding's opening is one news however many
ticks see it open). Times are the session's (seconds), passed in; nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from vramtop.core.diagnosis.memory_evidence import NO_NORMAL_RATE
from vramtop.core.findings import (
    SERVER_CRASHED,
    VRAM_CONTENTION,
    VRAM_SLOWDOWN,
    Finding,
    finding_id,
    headline,
)
from vramtop.core.json_types import JsonValue
from vramtop.core.model import GIB
from vramtop.core.rate_figures import rate_text
from vramtop.core.windows.spill import SPILL_THRESHOLD_BYTES


class NewsKind(StrEnum):
    """What a piece of news tells (its `change`): a finding opened or closed, an action."""

    OPENED = "opened"
    CLOSED = "closed"
    ACTION = "action"


OPENED, CLOSED, ACTION = NewsKind.OPENED, NewsKind.CLOSED, NewsKind.ACTION
# A toast shows three or four lines; a body longer than this is cut at a word.
BODY_CHARS = 240


@dataclass(frozen=True)
class News:
    """One piece of news: `key` dedups it, `severity` is the finding's ("critical",
    "warning") or "info"; `finding` is the finding's JSON (as `diagnose --json` writes it)
    when the news is about one, for `--on-finding`. Added: `change`, what the news is
    (`opened`, `closed` or `action`), for the terminal's taskbar state."""

    key: str
    title: str
    body: str
    severity: str
    finding: Mapping[str, JsonValue] | None = None
    change: str | None = None


def finding_opened(finding: Finding, *, plan: str | None = None) -> News:
    """A finding has opened: what happened in words, then the remedy (or `plan`, what the
    guard is about to do: "Relaunching at 0.85 between agent turns.")."""
    lead = _lead(finding)
    then = plan if plan is not None else _remedy_words(finding)
    return News(
        key=f"{OPENED}:{finding_id(finding)}",
        title=f"vLLM: {headline(finding.kind)}",
        body=_cut(f"{lead} {then}".strip()),
        severity=finding.severity,
        finding=finding.to_json(),
        change=OPENED,
    )


def finding_closed(finding: Finding) -> News:
    """A finding has closed: the server recovered."""
    lasted = finding.duration_s
    after = f" after {_duration(lasted)}" if lasted is not None else ""
    return News(
        key=f"{CLOSED}:{finding_id(finding)}",
        title=f"vLLM recovered: {finding.kind.replace('_', ' ')} is over",
        body=_cut(f"{headline(finding.kind)}: over{after}."),
        severity="info",
        finding=finding.to_json(),
        change=CLOSED,
    )


def action_news(
    action: str,
    result: str,
    *,
    finding: Finding | None = None,
    gpu_memory_utilization: float | None = None,
    reason: str | None = None,
) -> News:
    """An action taken (or not) for the person: `action` ("relaunch", "restart"), `result`
    ("ok", "failed", "rolled_back", "waiting", "skipped"), `reason` in words when there is
    one ("a request is running", "3 relaunches in the last hour")."""
    what = action if gpu_memory_utilization is None else f"{action} at {gpu_memory_utilization:g}"
    words = _RESULT_WORDS.get(result, result.replace("_", " "))
    body = f"{what[:1].upper()}{what[1:]}: {words}"
    body += f" ({reason})." if reason else "."
    if finding is not None:
        body += f" {_lead(finding)}"
    severity = "info" if result in ("ok", "waiting", "relaunching") else "warning"
    return News(
        key=f"{ACTION}:{action}:{result}:{gpu_memory_utilization}:{reason}",
        title=f"vramtop: {what} {words}",
        body=_cut(body),
        severity=severity,
        finding=finding.to_json() if finding is not None else None,
        change=ACTION,
    )


_RESULT_WORDS = {
    "ok": "served",
    "failed": "did not start",
    "rolled_back": "did not start; the previous flags serve again",
    "waiting": "waiting for a moment with no request running",
    "relaunching": "under way",  # (the guard's: its relaunch begins now)
    "skipped": "not done",
}


def _lead(finding: Finding) -> str:
    """The finding in one sentence that leads with words: for a slowdown, the rate and what
    took the memory; for a collapse memory alone names, what the memory showed; otherwise
    its summary."""
    evidence = finding.evidence
    rate = _number(evidence.get("generation_tps"))
    normal = _number(evidence.get("baseline_generation_tps"))
    if finding.kind == VRAM_CONTENTION and finding.confidence == NO_NORMAL_RATE:
        return _memory_lead(evidence, rate)
    if finding.kind in (VRAM_CONTENTION, VRAM_SLOWDOWN) and rate is not None:
        was = f" (normally {rate_text(normal)})" if normal else ""
        return f"vLLM slowed to {rate_text(rate)} tok/s{was}: the desktop took its memory."
    if finding.kind == SERVER_CRASHED:
        return finding.summary or "vLLM went down without being asked to."
    return finding.summary


def _memory_lead(evidence: Mapping[str, JsonValue], rate: float | None) -> str:
    """A collapse that memory alone names: with no normal rate, the rate is only what it is
    now (not "slowed"), and what the memory shows is said as it was seen: the desktop past
    what the budget leaves it took vLLM's memory; vLLM's buffers seen evicted into GTT, with
    the desktop within its allowance, were moved out of VRAM, and the desktop took nothing."""
    unsure = "no normal rate known yet"
    over = _number(evidence.get("desktop_over_allowance_bytes"))
    gtt_alone = (
        evidence.get("spill_source") == "gtt" and over is not None and over < SPILL_THRESHOLD_BYTES
    )
    whose = "its" if rate else "vLLM's"
    if gtt_alone:
        rise = _number(evidence.get("server_gtt_rise_bytes"))
        amount = f"{rise / GIB:.1f} GiB" if rise else "part"
        seen = f"{amount} of {whose} memory was moved out of VRAM into system memory"
    else:
        seen = f"the desktop took {whose} memory"
    if rate:
        return f"vLLM runs at {rate_text(rate)} tok/s ({unsure}): {seen}."
    return f"{seen[:1].upper()}{seen[1:]} ({unsure})."


def _remedy_words(finding: Finding) -> str:
    remedy = finding.remedy
    if remedy.action == "relaunch" and remedy.budget is not None:
        length = f" with --max-model-len {remedy.max_model_len:,}" if remedy.max_model_len else ""
        return f"Relaunch at {remedy.budget:.2f}{length} (b in the console)."
    if remedy.action == "restart":
        return "Restart it (r in the console)."
    return ""


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _cut(text: str, limit: int = BODY_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 1].rsplit(" ", 1)[0] + "…"
