"""server_crashed and startup_out_of_memory: vLLM is not serving, and why.

A startup out-of-memory is read from vLLM's own line ("Free memory on device … is less than
desired GPU memory utilization …"), whose numbers give the largest budget that would fit.
"""

from __future__ import annotations

from typing import Any

from vramtop.core.budget import largest_util_that_fits_logged
from vramtop.core.vllm.log import parse_startup_oom


def startup_oom_facts(line: str) -> dict[str, float] | None:
    """The numbers of vLLM's 'Free memory on device … is less than desired …' line."""
    oom = parse_startup_oom(line)
    return oom.as_dict() if oom is not None else None


def startup_oom_report(text: str, facts: dict[str, float]) -> dict[str, Any]:
    """The finding's fields for the OOM line `text` and its `startup_oom_facts`."""
    util = largest_util_that_fits_logged(facts["free_gib"], facts["total_gib"])
    return {
        "severity": "critical",
        "summary": (
            f"vLLM could not start: {facts['free_gib']:.2f} GiB were free but its budget "
            f"at {facts['requested_util']:.2f} needs {facts['requested_gib']:.2f} GiB."
        ),
        "evidence": facts,
        "ruled_out": {},
        "ladder": {
            "observed": [text.strip()],
            "inferred": ["other programs hold more of the card than the budget leaves them"],
            "hypothesis": [],
        },
        "remedy": {
            "action": "relaunch",
            "gpu_memory_utilization": util,
            # The same budget would fail the same way: no restart is offered.
            "restart_fails": True,
            "why": f"{util:.2f} is the largest budget that fits the free memory; or close "
            "what holds the card and start again",
        },
    }


# A server whose every request times out for this long is hung (or stopped), not slow: vLLM
# answers /metrics and /health from its API process even while the engine is busy.
NOT_ANSWERING_S = 10.0


def not_answering_report(seconds: float) -> dict[str, Any]:
    """The finding's fields for a server whose process is there but answers nothing."""
    observed = f"every request has timed out for {seconds:.0f} s; its port is still held"
    return {
        "severity": "critical",
        "summary": f"vLLM is not answering: no reply for {seconds:.0f} s.",
        "evidence": {"not_answering_s": round(seconds, 1)},
        "ruled_out": {"down": {"why": "the connection is accepted: a process holds the port"}},
        "ladder": {
            "observed": [observed],
            "inferred": ["the server process is hung or stopped (SIGSTOP, a debugger, swap)"],
            "hypothesis": [],
        },
        "remedy": {
            "action": "restart",
            "why": "restart the server; requests in flight are already lost",
        },
    }


def crash_report(why: str, evidence: dict[str, Any]) -> dict[str, Any]:
    """The finding's fields for a server that went down unasked (`why`, in words)."""
    return {
        "severity": "critical",
        "summary": f"vLLM is down: {why}.",
        "evidence": evidence,
        "ruled_out": {"planned": {"why": "no stop, restart or relaunch was requested"}},
        "ladder": {"observed": [why], "inferred": [], "hypothesis": []},
        "remedy": {
            "action": "restart",
            "why": "start the server again and read its last log lines",
        },
    }
