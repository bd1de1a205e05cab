"""The bundled alert rules: promtool accepts them, their unit tests pass, and they speak of
what the exporter exposes with the diagnosis's own thresholds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.export.promtool import promtool
from vramtop import cli
from vramtop.commands.export import DASHBOARD_FILE, RULES_FILE, asset_text
from vramtop.core.diagnosis.thresholds import CARD_FULL, COLLAPSE_RATIO, PREFILL_COLLAPSE_RATIO
from vramtop.core.metric_list import METRICS, SPECS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RULES = ROOT / "vramtop" / "export" / RULES_FILE


# The alert names are a contract: only added to.
ALERTS = (
    "VllmSilentCollapse",
    "VllmSpillToSharedMemory",
    "VramtopSamplingStalled",
    "VllmServerCrashed",
    "VllmServerNotAnswering",
    "VllmServerDown",
    "VllmKvCachePressure",
    "VramtopExporterDown",
    "VramtopExporterAbsent",
)


def rules() -> dict[str, dict[str, object]]:
    groups = yaml.safe_load(asset_text(RULES_FILE))["groups"]
    return {rule["alert"]: rule for group in groups for rule in group["rules"]}


def test_promtool_accepts_the_rule_file() -> None:
    result = promtool("check", "rules", RULES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in result.stdout


def test_the_rules_unit_tests_pass_in_promtool() -> None:
    # rules_test.yml: each alert fires on its signs after its `for`, and not on the near
    # misses (an agent's prompts, a stop asked for, a load, a busy but unblocked pool, a node
    # exporter down).
    result = promtool("test", "rules", "rules_test.yml", cwd=HERE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_collapse_rule_uses_the_diagnosis_thresholds_and_holds_30_s() -> None:
    collapse = rules()["VllmSilentCollapse"]
    expr = str(collapse["expr"])
    # Per request against per request: the total over requests still reading their prompts
    # is never compared with the total they would decode at.
    assert "max_over_time(vramtop_request_decode_tokens_per_second[1m])" in expr
    assert (
        f"< {COLLAPSE_RATIO} * min_over_time(vramtop_request_decode_normal_tokens_per_second"
        in expr
    )
    assert f"< {PREFILL_COLLAPSE_RATIO} * min_over_time(" in expr
    assert "vramtop_generation_normal_tokens_per_second" not in expr
    assert f">= {CARD_FULL})" in expr
    assert 'vramtop_finding_open{kind="vram_contention"}' in expr
    assert collapse["for"] == "30s"
    assert rules()["VllmSpillToSharedMemory"]["for"] == "30s"


def names_in(text: str) -> set[str]:
    return set(re.findall(r"\bvramtop_[a-z_]+[a-z]", text))


@pytest.mark.parametrize("asset", [RULES_FILE, DASHBOARD_FILE])
def test_the_rules_and_the_dashboard_only_name_exported_metrics(asset: str) -> None:
    named = names_in(asset_text(asset))
    assert named, "no metric named"
    assert named <= set(SPECS), named - set(SPECS)


def test_the_docs_list_every_metric() -> None:
    page = (ROOT / "docs" / "prometheus.md").read_text()
    missing = [spec.name for spec in METRICS if f"`{spec.name}`" not in page]
    assert missing == []


@pytest.mark.parametrize(
    ("flag", "asset"), [("--print-rules", RULES_FILE), ("--print-dashboard", DASHBOARD_FILE)]
)
def test_print_flags_print_the_bundled_files(
    flag: str, asset: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["export", flag]) == 0
    assert capsys.readouterr().out == (ROOT / "vramtop" / "export" / asset).read_text()


def test_the_rule_file_holds_every_alert_and_the_docs_name_each() -> None:
    assert tuple(rules()) == ALERTS
    page = (ROOT / "docs" / "prometheus.md").read_text()
    assert [name for name in ALERTS if f"**`{name}`**" not in page] == []
    reference = (ROOT / "docs" / "reference.md").read_text()
    contract = reference[reference.index("and the alert names") :].split("\n- ")[0]
    assert [name for name in ALERTS if f"`{name}`" not in contract] == []


def test_the_kv_rule_uses_the_diagnosis_threshold() -> None:
    from vramtop.core.diagnosis.thresholds import KV_HIGH

    assert f"vramtop_kv_cache_usage_ratio >= {KV_HIGH}" in str(
        rules()["VllmKvCachePressure"]["expr"]
    )


def test_the_docs_name_every_finding_kind_of_vramtop_finding_open() -> None:
    from vramtop.core.findings import KINDS

    page = (ROOT / "docs" / "prometheus.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| `vramtop_finding_open`"))
    assert [kind for kind in KINDS if f"`{kind}`" not in row] == []
