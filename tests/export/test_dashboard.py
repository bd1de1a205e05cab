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
