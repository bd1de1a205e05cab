"""The bundled Grafana dashboard: it loads, works across boxes through `$instance`, and every
query in it (variables filled in) is PromQL that Prometheus's own checker accepts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.export.promtool import promtool
from vramtop.commands.export import DASHBOARD_FILE, asset_text

# What Grafana puts in place of its variables when it sends a query.
FILLED = {
    "$instance": "desk:9464|lab-1:9464",
    "$__rate_interval": "1m",
    "$__interval": "15s",
    "$__range": "1h",
}


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(asset_text(DASHBOARD_FILE))
    return loaded


def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in items:
        yield panel
        yield from panels(panel.get("panels", []))  # panels inside collapsed rows


def queries(board: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, expr) for every panel target and every annotation with a query."""
    found = [
        (f"panel {p['title']!r} {t['refId']}", t["expr"])
        for p in panels(board["panels"])
        for t in p.get("targets", [])
    ]
    found += [
        (f"annotation {a['name']!r}", a["expr"])
        for a in board["annotations"]["list"]
        if "expr" in a
    ]
    return found


def fill(expr: str) -> str:
    for variable, value in FILLED.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"a variable left unfilled: {expr}"
    return expr


def check(exprs: list[str], tmp_path: Path) -> Any:
    rule_file = tmp_path / "dashboard-queries.yml"
    rules = [{"record": f"vramtop_dashboard_query_{i}", "expr": e} for i, e in enumerate(exprs)]
    rule_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    return promtool("check", "rules", rule_file)


def test_every_query_with_its_variables_filled_is_accepted_by_promtool(tmp_path: Path) -> None:
    found = queries(dashboard())
    assert len(found) >= 10
    result = check([fill(expr) for _, expr in found], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(found)} rules found" in result.stdout


def test_the_check_does_reject_a_broken_query(tmp_path: Path) -> None:
    result = check(['vramtop_kv_pool_bytes{instance=~"x"'], tmp_path)
    assert result.returncode != 0


def test_every_query_is_scoped_by_the_instance_variable() -> None:
    board = dashboard()
    variables = {v["name"]: v for v in board["templating"]["list"]}
    instance = variables["instance"]
    assert instance["type"] == "query" and instance["multi"] and instance["includeAll"]
    assert "label_values(vramtop_build_info, instance)" in json.dumps(instance["query"])
    for where, expr in queries(board):
        assert 'instance=~"$instance"' in expr, where


def test_the_dashboard_shows_the_split_the_kv_pool_the_rates_and_findings_as_annotations() -> None:
    board = dashboard()
    exprs = " ".join(expr for _, expr in queries(board))
    for metric in (
        "vramtop_server_memory_bytes",
        "vramtop_desktop_memory_bytes",
        "vramtop_kv_pool_bytes",
        "vramtop_kv_cache_usage_ratio",
        "vramtop_generation_tokens_per_second",
        "vramtop_generation_normal_tokens_per_second",
    ):
        assert metric in exprs
    annotations = [a for a in board["annotations"]["list"] if "expr" in a]
    assert any("vramtop_finding_open" in a["expr"] for a in annotations)


# --- the collapse line on a real vLLM's healthy traffic ----------------------------------------

AGENT_RECORDING = (
    Path(__file__).resolve().parents[1] / "fixtures/sessions/real_vllm_agent_load.jsonl"
)
BOX = {"instance": "desk:9464", "job": "vramtop"}


def exported(path: Path) -> list[dict[str, float]]:
    """What `vramtop export` serves at each sample of a recording, as {series: value}: the
    samples through the diagnosis as the live session feeds it, then the exposition."""
    from vramtop.core.diagnosis.diagnoser import Diagnoser
    from vramtop.core.exposition import ExportState, series_for
    from vramtop.core.model import Sample
    from vramtop.session.session_reader import read_session

    header, records = read_session(path)
    diagnoser = Diagnoser(remembered=header.normal_rate)
    scrapes = []
    for record in records:
        if not isinstance(record, Sample):
            if record.name != "finding":
                diagnoser.feed_event(record.t, record.name, record.detail)
            continue
        diagnoser.feed_sample(record)
        state = ExportState(version="test", sample=record, throughput=diagnoser.throughput)
        scrapes.append({_selector(s.name, dict(s.labels)): s.value for s in series_for(state)})
    return scrapes


def _selector(name: str, labels: dict[str, str]) -> str:
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted({**labels, **BOX}.items()))
    return f"{name}{{{inner}}}"


def collapse_panel() -> dict[str, str]:
    """The rate panel's queries by refId (A: the rate, C: the collapse line)."""
    panel = next(p for p in panels(dashboard()["panels"]) if "collapse line" in json.dumps(p))
    return {t["refId"]: t["expr"] for t in panel["targets"]}


def promtool_values(scrapes: list[dict[str, float]]) -> list[dict[str, str]]:
    """promtool input series, one scrape a second; a series absent from a scrape is stale
    there, as Prometheus marks a series that a scrape no longer carries."""
    names = sorted({name for scrape in scrapes for name in scrape})
    series = []
    for name in names:
        seen, values = False, []
        for scrape in scrapes:
            if name in scrape:
                seen = True
                values.append(repr(scrape[name]))
            else:
                values.append("stale" if seen else "_")
        series.append({"series": name, "values": " ".join(values)})
    return series


def test_healthy_agent_traffic_of_a_real_vllm_never_falls_under_the_collapse_line(
    tmp_path: Path,
) -> None:
    scrapes = exported(AGENT_RECORDING)
    per_request = "vramtop_request_decode_tokens_per_second"
    judged = [s for s in scrapes if any(name.startswith(per_request) for name in s)]
    # The recording is under an agent's load: its total rate reads under the old line
    # (0.35 of the normal total of the requests running) where nothing was slow.
    total = _selector("vramtop_generation_tokens_per_second", {})
    normal_total = _selector("vramtop_generation_normal_tokens_per_second", {})
    under_old = [s for s in scrapes if total in s and normal_total in s]
    under_old = [s for s in under_old if s[total] < 0.35 * s[normal_total]]
    print(
        f"{len(judged)} of {len(scrapes)} scrapes carry a per-request rate; "
        f"{len(under_old)} had the total under 0.35 of the normal total"
    )
    assert len(judged) >= len(scrapes) // 2
    assert under_old, "the recording no longer shows totals that read low"

    queries = collapse_panel()
    under = f"({fill(queries['A'])}) < ({fill(queries['C'])})"
    test_file = {
        "tests": [
            {
                "interval": "1s",
                "input_series": promtool_values(scrapes),
                "promql_expr_test": [
                    {"expr": under, "eval_time": f"{i}s", "exp_samples": []}
                    for i in range(len(scrapes))
                ]
                + [  # the rate is there to be compared: the panel is not empty
                    {
                        "expr": f"count({fill(queries['A'])}) > 0",
                        "eval_time": f"{i}s",
                        "exp_samples": [{"labels": "{}", "value": 1}],
                    }
                    for i, scrape in enumerate(scrapes)
                    if scrape in judged
                ],
            }
        ]
    }
    (tmp_path / "collapse_line_test.yml").write_text(yaml.safe_dump(test_file))
    result = promtool("test", "rules", "collapse_line_test.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
