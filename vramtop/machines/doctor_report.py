"""`vramtop doctor`'s report: the checks run in order, the verdict (the exit code: the split
the console can show), and the report as `--json` writes it and as the terminal shows it.
The checks themselves are `setup_checks`."""

from __future__ import annotations

from typing import TypedDict

from vramtop.machines.setup_checks import (
    EXIT_NO_GPU,
    EXIT_SPLIT_DERIVED,
    EXIT_SPLIT_SHOWN,
    Check,
    Facts,
    Status,
    amd_checks,
    card_checks,
    gpu_checks,
    host_checks,
    server_checks,
)


def verdict(f: Facts, checks: list[Check]) -> tuple[int, str]:
    """(exit code, the split the console can show)."""
    r = f.reading
    if not r.available:
        return EXIT_NO_GPU, "none"
    if r.devices[0].processes is not None:
        return EXIT_SPLIT_SHOWN, "per_process"
    if any(c.name == "windows_counters" and c.status == "ok" for c in checks):
        return EXIT_SPLIT_SHOWN, "windows"
    return EXIT_SPLIT_DERIVED, "derived"


class CheckLine(TypedDict):
    """A check as `doctor --json` writes it (a `Check`'s fields, in their order)."""

    name: str
    status: Status
    detail: str
    fix: str | None


class Report(TypedDict):
    """What `doctor --json` prints: the split the console can show, the exit code, each
    check."""

    split: str  # per_process, windows, derived, none
    exit_code: int
    checks: list[CheckLine]


def run_checks(f: Facts) -> tuple[int, Report]:
    checks = [
        *gpu_checks(f),
        *host_checks(f),
        *card_checks(f),
        *amd_checks(f),
        *server_checks(f),
    ]
    code, split = verdict(f, checks)
    lines: list[CheckLine] = [
        {"name": c.name, "status": c.status, "detail": c.detail, "fix": c.fix} for c in checks
    ]
    return code, {"split": split, "exit_code": code, "checks": lines}


def render(report: Report) -> str:
    marks = {"ok": "ok  ", "warn": "warn", "fail": "FAIL", "skip": "--  "}
    lines = []
    for c in report["checks"]:
        line = f"{marks[c['status']]}  {c['name']:<16} {c['detail']}"
        if c["fix"]:
            line += f"\n      {'':<16} fix: {c['fix']}"
        lines.append(line)
    words = {
        "per_process": "the console shows the split from per-process numbers",
        "windows": "the console shows the split from Windows' counters",
        "derived": "the console can only derive vLLM's share from its budget",
        "none": "the console cannot read the GPU",
    }
    lines.append(f"verdict: {words[report['split']]} (exit {report['exit_code']})")
    return "\n".join(lines)
