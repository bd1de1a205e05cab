"""The news's words: they lead with what happened, then what to do or what is being done."""

from __future__ import annotations

from notify_fakes import contention

from vramtop.core.findings import Finding
from vramtop.core.news import BODY_CHARS, action_news, finding_closed, finding_opened


def test_a_collapse_leads_with_the_rate_and_what_took_the_memory() -> None:
    news = finding_opened(contention(), plan="Relaunching at 0.85 between agent turns.")
    assert news.title == "vLLM: The desktop is squeezing vLLM's memory"
    assert news.body == (
        "vLLM slowed to 7 tok/s (normally 77): the desktop took its memory. "
        "Relaunching at 0.85 between agent turns."
    )
    assert news.severity == "critical" and news.change == "opened"
    assert news.finding is not None and news.finding["kind"] == "vram_contention"


def test_a_closed_finding_says_it_is_over_and_how_long_it_held() -> None:
    from dataclasses import replace

    news = finding_closed(replace(contention(t=10.0), closed_t=190.0))
    assert news.title == "vLLM recovered: vram contention is over"
    assert news.body == "The desktop is squeezing vLLM's memory: over after 3 min."
    assert news.key != finding_opened(contention(t=10.0)).key


def test_an_action_says_what_was_done_and_how_it_ended() -> None:
    news = action_news("relaunch", "rolled_back", gpu_memory_utilization=0.85)
    assert news.body == "Relaunch at 0.85: did not start; the previous flags serve again."
    assert news.severity == "warning"
    waited = action_news("relaunch", "waiting", reason="a request is running")
    assert waited.body.endswith("(a request is running).")
    assert waited.key != news.key
    # The guard's relaunch beginning: said as under way, as news, not as a warning.
    begun = action_news("relaunch", "relaunching", gpu_memory_utilization=0.83)
    assert begun.title == "vramtop: relaunch at 0.83 under way"
    assert begun.body == "Relaunch at 0.83: under way." and begun.severity == "info"


def test_another_kind_says_its_summary_and_a_long_one_is_cut_at_a_word() -> None:
    finding = Finding(
        kind="server_crashed",
        severity="critical",
        first_seen_t=0.0,
        last_seen_t=0.0,
        closed_t=None,
        summary="vLLM exited with code -9 " + "and more words " * 40,
    )
    news = finding_opened(finding)
    assert news.body.startswith("vLLM exited with code -9")
    assert len(news.body) <= BODY_CHARS and news.body.endswith("…")
