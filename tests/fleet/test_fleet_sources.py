"""Where `vramtop fleet` reads its boxes: a `[fleet]` table in config.toml when the command
line names none (a bad entry: one line naming config.toml and the entry, exit 2), the
command line over the table, and Prometheus over the exporters where both are given (said on
stderr)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fleet_page import FakeExporter, once_json
from vramtop import cli
from vramtop.locations import settings_file


def write_config(text: str) -> Path:
    path = settings_file()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_the_fleet_table_names_the_boxes_when_the_command_line_does_not(
    box: FakeExporter, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(f'[fleet]\nr9700 = "{box.url}"\ngone = "http://127.0.0.1:9"\n')
    rows = once_json(capsys)
    assert [(row["name"], row["status"]) for row in rows] == [
        ("r9700", "up"),
        ("gone", "unreachable"),
    ]
    # The command line's boxes over the table's.
    rows = once_json(capsys, f"desk={box.url}")
    assert [row["name"] for row in rows] == ["desk"]


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ('desk = "desk:9464"', "field 'fleet': desk=desk:9464: give http://HOST:PORT"),
        ('"bad name" = "http://x:1"', "'bad name': a box's name is letters"),
        ("desk = 9464", "field 'fleet': must be a table of name = URL strings"),
        ('prometheus = "prom:9090"', "prometheus = prom:9090: give http://HOST:PORT"),
        ('desk = "http://u:hunter2@x:99999"', "the port must be a number"),
    ],
)
def test_a_bad_fleet_entry_is_one_line_naming_the_file_and_exit_2(
    table: str, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(f"[fleet]\n{table}\n")
    assert cli.main(["fleet", "--once"]) == 2
    err = capsys.readouterr().err
    assert words in err and str(path) in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "hunter2" not in err


def test_an_empty_fleet_table_asks_for_a_box(capsys: pytest.CaptureFixture[str]) -> None:
    write_config("[fleet]\n")
    assert cli.main(["fleet", "--once"]) == 2
    err = capsys.readouterr().err
    assert "[fleet] table" in err and len(err.strip().splitlines()) == 1


def test_prometheus_is_used_over_the_exporters_and_says_so(
    box: FakeExporter, capsys: pytest.CaptureFixture[str]
) -> None:
    # Nothing listens on port 9: the Prometheus read fails, which shows which one was used.
    assert cli.main(["fleet", "--once", "--prometheus", "http://127.0.0.1:9", f"a={box.url}"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert "reading the boxes through Prometheus at http://127.0.0.1:9" in err[0]
    assert "(a) are not read" in err[0]
    assert err[1] == "vramtop fleet: Prometheus: no answer (refused or unreachable)"
    write_config(f'[fleet]\na = "{box.url}"\nprometheus = "http://127.0.0.1:9"\n')
    assert cli.main(["fleet", "--once"]) == 1
    assert "through Prometheus" in capsys.readouterr().err
