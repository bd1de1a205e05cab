"""A key typed where it does not belong is never repeated: in a URL's query string (text,
JSON, errors), as the value of `--api-key-env`, or among arguments the parser refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli_run import run_captured

KEY = "sk-LEAK0a1b2c3d4e5f6a7b8"


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))


@pytest.mark.parametrize("param", ["api_key", "token", "key", "access_token", "sig"])
@pytest.mark.parametrize("json", [[], ["--json"]])
def test_a_key_in_a_urls_query_is_masked_in_text_and_json(param: str, json: list[str]) -> None:
    # Port 9 (discard) refuses at once: the snapshot says so, naming the URL.
    _, out = run_captured(["--once", *json, "--url", f"http://127.0.0.1:9/?{param}={KEY}&x=1"])
    assert KEY not in out
    assert f"{param}=***&x=1" in out


def test_a_url_refused_for_its_scheme_does_not_repeat_its_key() -> None:
    for argv in (
        ["--once", "--url", f"ftp://127.0.0.1:9/?api_key={KEY}"],
        ["export", "--url", f"ftp://127.0.0.1:9/?token={KEY}"],
    ):
        code, out = run_captured(argv)
        assert code == 2 and KEY not in out, out


@pytest.mark.parametrize("value", [KEY, "hf_abcdefghijklmnopqrstuvwxyz0123", "a1b2c3d4e5f6a7b8c9"])
def test_a_key_given_to_api_key_env_is_refused_without_repeating_it(value: str) -> None:
    code, out = run_captured(["--once", "--api-key-env", value, "--url", "http://127.0.0.1:9"])
    assert code == 2 and value not in out
    assert "--api-key-env" in out and ("not a variable's name" in out or "looks like a key" in out)


def test_an_unset_variable_is_still_named() -> None:
    code, out = run_captured(
        ["--once", "--api-key-env", "NO_SUCH_VAR_38", "--url", "http://127.0.0.1:9"]
    )
    assert code == 2 and "no variable NO_SUCH_VAR_38 is set" in out


def test_arguments_the_parser_refuses_do_not_repeat_a_key() -> None:
    code, out = run_captured(["status", "--api-key-env", KEY, "--api-key", "plain-word-key"])
    assert code == 2 and "unrecognized arguments" in out
    assert KEY not in out and "plain-word-key" not in out


@pytest.mark.parametrize(
    "argv",
    [
        ["start", "--profile", KEY],
        ["status", "--profile", KEY],
        ["profile", "show", KEY],
        ["lint", KEY],
        ["--once", "--profile", KEY],
    ],
)
def test_a_key_given_as_a_profiles_name_is_not_repeated(argv: list[str]) -> None:
    code, out = run_captured(argv)
    assert code == 2 and KEY not in out and "no profile has the name given" in out


def test_a_plain_unknown_name_is_still_named() -> None:
    code, out = run_captured(["profile", "show", "nosuch"])
    assert code == 2 and "no profile named 'nosuch'" in out


def test_a_key_given_to_imports_front_door_is_not_repeated(tmp_path: Path) -> None:
    script = tmp_path / "serve.sh"
    script.write_text("vllm serve m\n")
    code, out = run_captured(["import", str(script), "--front-door", KEY])
    assert code == 2 and KEY not in out and "--front-door" in out


@pytest.mark.parametrize("print_unit", [[], ["--print-unit"]])
@pytest.mark.parametrize(
    "command", [f"curl -H 'Authorization: Bearer {KEY}", f'tool --api-key "{KEY}', f"x '{KEY}"]
)
def test_an_on_finding_command_that_cannot_be_split_does_not_repeat_its_key(
    command: str, print_unit: list[str]
) -> None:
    code, out = run_captured(["guard", "--demo", *print_unit, "--on-finding", command])
    assert code == 2 and "cannot be split into words" in out
    assert KEY not in out, out
