"""A finding's typed parts write the session format's JSON exactly as the report built it."""

from __future__ import annotations

from vramtop.core.findings import Evidence, Kind, Ladder, Remedy, headline, report_fields
from vramtop.core.server_events import Event

RELAUNCH = {
    "action": "relaunch",
    "gpu_memory_utilization": 0.85,
    "desktop_headroom_bytes": 4_000_000_000,
    "current_gpu_memory_utilization": None,
    "kv_pool_bytes": 9_000_000_000,
    "kv_pool_bytes_after": 7_000_000_000,
    "kv_cache_tokens_after": 210_000,
    "why": "relaunch at 0.85 to leave the desktop its peak plus a margin",
}
OPTIONS = {
    "action": "relaunch",
    "options": [
        {"flag": "--gpu-memory-utilization", "value": 0.9, "kv_pool_bytes_after": 1},
        {"flag": "--max-num-seqs", "value": None, "why": "fewer sequences share the pool"},
    ],
}


def test_a_remedy_reads_its_fields_and_writes_back_every_key() -> None:
    remedy = Remedy.from_json(RELAUNCH)
    assert remedy.action == "relaunch" and remedy.budget == 0.85
    assert remedy.kv_pool_bytes_after == 7_000_000_000 and not remedy.restart_fails
    assert remedy.details["kv_cache_tokens_after"] == 210_000
    assert remedy.to_json() == RELAUNCH
    options = Remedy.from_json(OPTIONS)
    assert [o.flag for o in options.options] == ["--gpu-memory-utilization", "--max-num-seqs"]
    assert options.options[1].why == "fewer sequences share the pool"
    assert options.to_json() == OPTIONS
    assert Remedy.from_json({}).to_json() == {}


def test_a_remedy_of_the_wrong_kind_reads_as_unknown() -> None:
    odd = Remedy.from_json({"gpu_memory_utilization": True, "action": 3, "restart_fails": "yes"})
    assert odd.budget is None and odd.action is None and not odd.restart_fails


def test_a_ladder_keeps_its_rungs_in_order_and_says_nothing_when_empty() -> None:
    ladder = Ladder.from_json({"observed": ["a", "b"], "hypothesis": "c"})
    assert ladder.rungs() == [("observed", ("a", "b")), ("hypothesis", ("c",))]
    assert ladder.to_json() == {"observed": ["a", "b"], "inferred": [], "hypothesis": ["c"]}
    assert Ladder().to_json() == {} and Ladder.from_json(None) == Ladder()


def test_evidence_is_read_only_and_names_the_spill() -> None:
    evidence = Evidence({"wsl_vm_shared_rise_bytes": 2_000_000_000, "ratio": 0.1})
    assert evidence.spill_rise_bytes == 2_000_000_000 and evidence["ratio"] == 0.1
    assert Evidence({"ratio": 0.1}).spill_rise_bytes is None
    assert evidence.to_json() == {"wsl_vm_shared_rise_bytes": 2_000_000_000, "ratio": 0.1}
    assert evidence == {"wsl_vm_shared_rise_bytes": 2_000_000_000, "ratio": 0.1}


def test_a_report_becomes_typed_finding_fields() -> None:
    fields = report_fields({"severity": "warning", "remedy": OPTIONS, "ladder": {}})
    assert isinstance(fields["remedy"], Remedy) and isinstance(fields["ladder"], Ladder)
    assert fields["severity"] == "warning" and "evidence" not in fields


def test_an_event_writes_the_event_line() -> None:
    event = Event(300.5, "restart", {"reason": "key r"})
    assert event.to_json() == {"t": 300.5, "event": "restart", "detail": {"reason": "key r"}}
    assert Event(1.0, "start").detail == {}


def test_the_kv_pressure_headline_names_the_kv_pool() -> None:
    """The glossary's word for the memory vLLM keeps for the KV cache, on the banner and in
    the notifications' title: the KV pool, as the VRAM panel and the what-if call it."""
    assert headline(Kind.KV_PRESSURE) == "The KV pool is too small for this load"
