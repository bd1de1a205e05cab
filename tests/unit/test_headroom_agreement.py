"""One machine state, one headroom: `calc --json`, `lint` and the core's budget functions give
the same desktop headroom and the same budget that leaves the desktop 3 GiB.

The state: a 31.84 GiB card at --gpu-memory-utilization 0.93, no running server to measure
what vLLM holds outside its budget (so the estimate counts everywhere), or a measured figure
handed to each surface.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vramtop import cli
from vramtop.core.budget import (
    GIB,
    OUTSIDE_BUDGET_ESTIMATE_BYTES,
    desktop_headroom_bytes,
    largest_util_leaving,
    outside_budget,
)
from vramtop.core.headroom.from_startup import gib
from vramtop.core.launch.launch_warnings import lint_launch

TOTAL_GIB = 31.84
UTIL = 0.93
WANTED_GIB = 3.0
TOTAL = gib(TOTAL_GIB)
MODEL = ["--weights-gib", "15", "--layers", "36", "--kv-heads", "8", "--head-dim", "128"]
GPU_LOG = Path(__file__).parents[1] / "fixtures" / "vllm-gpu-written" / "startup.log"
LAUNCH = "vllm serve Qwen/Qwen3-8B --host 127.0.0.1 --gpu-memory-utilization 0.93\n"
# The lint finding's figures: "leaves the desktop 1.73 GiB of 31.84 GiB", "… 0.89 or lower."
LEAVES = re.compile(r"leaves the desktop (-?\d+\.\d\d) GiB of (\d+\.\d\d) GiB")
OR_LOWER = re.compile(r"--gpu-memory-utilization (\d\.\d\d) or lower")


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))


def core(measured: int | None = None) -> tuple[str, str]:
    """The core's answer, as two-decimal text: (headroom GiB, the budget that leaves 3 GiB)."""
    outside = outside_budget(measured)
    headroom = desktop_headroom_bytes(TOTAL, UTIL, outside)
    util = largest_util_leaving(TOTAL, gib(WANTED_GIB), outside)
    return f"{headroom / GIB:.2f}", f"{util:.2f}"


def calc_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:  # type: ignore[type-arg]
    assert cli.main(["calc", *argv, "--for-headroom-gib", "3", "--json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def calc_answer(doc: dict) -> tuple[str, str]:  # type: ignore[type-arg]
    rows = {r["util"]: r for r in doc["rows"]}
    return f"{rows[UTIL]['desktop_headroom_gib']:.2f}", f"{doc['for_headroom']['util']:.2f}"


def lint_answer(message: str, fix: str) -> tuple[str, str]:
    leaves, or_lower = LEAVES.search(message), OR_LOWER.search(fix)
    assert leaves and or_lower, (message, fix)
    assert leaves.group(2) == f"{TOTAL_GIB:.2f}"
    return leaves.group(1), or_lower.group(1)


def lint_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    script = tmp_path / "launch.sh"
    script.write_text(LAUNCH)
    assert cli.main(["lint", str(script), "--total-gib", str(TOTAL_GIB)]) == 1
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if "headroom:" in ln]
    message, fix = line.split(" Fix: ")
    assert "estimated" in message  # it says where the outside figure came from
    return lint_answer(message, fix)


def test_the_core_figures_for_this_card() -> None:
    # 31.84 − ceil(31.84 × 0.93) − 0.5 estimated; (31.84 − 0.5 − 3) / 31.84 = 0.8901…
    assert core() == ("1.73", "0.89")
    assert core(round(0.35 * GIB)) == ("1.88", "0.89")  # the demo's measured 0.35 GiB


def test_calc_json_and_the_core_agree(capsys: pytest.CaptureFixture[str]) -> None:
    doc = calc_json(capsys, "--total-gib", str(TOTAL_GIB), "--util", str(UTIL), *MODEL)
    assert calc_answer(doc) == core()
    assert "outside_budget" in doc["rows"][0]["estimated"]


def test_lint_on_a_script_and_the_core_agree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert lint_script(tmp_path, capsys) == core()


def test_lint_and_calc_agree_on_one_machine_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = calc_json(capsys, "--total-gib", str(TOTAL_GIB), "--util", str(UTIL), *MODEL)
    assert lint_script(tmp_path, capsys) == calc_answer(doc) == ("1.73", "0.89")


def test_a_measured_outside_figure_counts_the_same_everywhere(
    capsys: pytest.CaptureFixture[str],
) -> None:
    measured = round(0.35 * GIB)
    argv = ["vllm", "serve", "m", "--host", "127.0.0.1", "--gpu-memory-utilization", "0.93"]
    # The default minimum (3 GiB) is not reached at 1.88 GiB: the finding is there.
    (finding,) = lint_launch(argv, total_bytes=TOTAL, outside_budget_bytes=measured)
    assert "0.35 GiB" in finding.message and "measured" in finding.message
    assert "estimated" not in finding.message
    doc = calc_json(
        capsys, "--total-gib", str(TOTAL_GIB), "--util", str(UTIL), *MODEL,
        "--outside-budget-gib", "0.35",
    )  # fmt: skip
    assert lint_answer(finding.message, finding.fix) == calc_answer(doc) == core(measured)


def test_lint_without_a_measurement_names_the_estimate() -> None:
    argv = ["vllm", "serve", "m", "--host", "127.0.0.1", "--gpu-memory-utilization", "0.93"]
    (finding,) = lint_launch(argv, total_bytes=TOTAL)
    assert f"{OUTSIDE_BUDGET_ESTIMATE_BYTES / GIB:.2f} GiB" in finding.message
    assert "CUDA context" in finding.message and "estimated" in finding.message


def test_no_budget_leaves_the_minimum_is_said_not_a_zero_budget() -> None:
    argv = ["vllm", "serve", "m", "--host", "127.0.0.1", "--gpu-memory-utilization", "0.5"]
    (finding,) = lint_launch(argv, total_bytes=3 * GIB)
    assert "0.00" not in finding.fix and "no budget leaves 3 GiB" in finding.fix


def test_calc_from_a_log_keeps_the_estimate_and_says_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The log's free memory on startup is the card less the desktop and the CUDA context
    # together: it cannot give the context alone, so the estimate counts, as lint's does.
    doc = calc_json(capsys, "--from-log", str(GPU_LOG))
    assert doc["rows"][0]["util"] == UTIL and doc["rows"][0]["outside_budget_gib"] == 0.5
    assert "outside_budget" in doc["rows"][0]["estimated"]
    assert calc_answer(doc) == core()
    assert any("does not show vLLM's CUDA context" in note for note in doc["notes"])


def test_a_given_outside_figure_is_named_in_the_notes(capsys: pytest.CaptureFixture[str]) -> None:
    doc = calc_json(
        capsys, "--total-gib", str(TOTAL_GIB), "--util", str(UTIL), *MODEL,
        "--outside-budget-gib", "0.35",
    )  # fmt: skip
    assert "outside_budget 0.35 GiB (--outside-budget-gib)" in doc["notes"]
