"""Bad numbers, URLs and session files: a clear message and exit 2, never "unexpected error"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vramtop import cli


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))


def _exit(argv: list[str]) -> int:
    try:
        return cli.main(argv)
    except SystemExit as exc:  # argparse's usage errors
        return int(exc.code or 0)


@pytest.mark.parametrize(
    "argv",
    [
        ["calc", "--total-gib", "nan", "--util", "0.9"],
        ["calc", "--total-gib", "inf", "--util", "0.9"],
        ["calc", "--total-gib", "1e300", "--util", "0.9"],
        ["calc", "--total-gib", "32", "--util", "0.9", "--layers", "1" * 400],
        ["--once", "--interval", "nan", "--url", "http://127.0.0.1:9"],
        ["--once", "--interval", "inf", "--url", "http://127.0.0.1:9"],
        ["--once", "--url", "http://[::1"],
        ["--once", "--url", "http://host:port"],
        ["--once", "--url", "http://127.0.0.1:0"],  # port 0 reaches no server: bad input
        ["--once", "--url", "http://127.0.0.1:"],
        ["doctor", "--url", "http://[::1]:0"],
        ["record", "out.jsonl", "--url", "ftp://x"],
        ["relaunch", "--demo", "--timeout", "-1"],
        ["start", "--timeout", "0"],
        ["calc", "--total-gib", "32", "--for-headroom-gib", "100", "--weights-gib", "10",
         "--layers", "4", "--kv-heads", "2", "--head-dim", "64"],
    ],
)  # fmt: skip
def test_unusable_numbers_and_urls_are_usage_errors(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _exit(argv) == 2
    err = capsys.readouterr().err
    assert "unexpected error" not in err and "Traceback" not in err and err.strip()


def test_a_password_in_a_bad_url_is_not_echoed(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit(["--once", "--url", "http://user:pw-secret-1@[::1"]) == 2
    # Nothing answers there: the snapshot is printed, and the exit says it is not serving.
    assert _exit(["--once", "--url", "http://user:pw-secret-1@127.0.0.1:9"]) == 6
    out, err = capsys.readouterr()
    assert "pw-secret-1" not in err and "user:***@" in err
    assert "pw-secret-1" not in out


def test_no_budget_for_the_headroom_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["calc", "--total-gib", "32", "--for-headroom-gib", "100", "--weights-gib", "10"]
    assert _exit([*argv, "--layers", "4", "--kv-heads", "2", "--head-dim", "64"]) == 2
    assert "no budget leaves 100 GiB" in capsys.readouterr().err


def _session(path: Path, lines: list[str]) -> Path:
    header = {"format": "vramtop-session", "version": 1, "started_at": "2026-01-01T00:00:00Z"}
    path.write_text("\n".join([json.dumps(header), *lines]) + "\n")
    return path


def test_a_session_with_no_readable_sample_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    huge = '{"t": ' + "9" * 400 + ', "gpus": []}'
    path = _session(tmp_path / "bad.jsonl", ["not json", deep, huge, '{"t": "x"}'])
    assert cli.main(["diagnose", str(path)]) == 2
    err = capsys.readouterr().err
    assert "no readable sample" in err and "4 damaged lines" in err


def test_damaged_lines_are_reported_beside_the_findings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = json.dumps({"t": 1.0, "gpus": [], "server": None})
    path = _session(tmp_path / "some.jsonl", [good, "{cut", "[" * 100_000])
    assert cli.main(["diagnose", str(path)]) == 0
    assert "2 damaged lines skipped" in capsys.readouterr().err


def test_an_api_key_variable_that_is_not_set_is_said_not_ignored(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VRAMTOP_TEST_UNSET_KEY", raising=False)
    argv = ["--once", "--url", "http://127.0.0.1:9", "--api-key-env", "VRAMTOP_TEST_UNSET_KEY"]
    assert _exit(argv) == 2
    err = capsys.readouterr().err
    assert "no variable VRAMTOP_TEST_UNSET_KEY is set" in err and "Traceback" not in err


@pytest.mark.parametrize("typed", ["1_0", "0x1p-3", "٠.٥", "nan", "1e-320x"])
def test_relaunch_takes_a_budget_written_plainly(
    typed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _exit(["relaunch", "--demo", "--budget", typed]) == 2
    err = capsys.readouterr().err
    assert "--budget" in err and "such as 0.85" in err and "Traceback" not in err
