"""`vramtop export` as a person runs it: where it listens, what it warns about, bad input, and
stopping it as systemd does."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import http
from tests.support.waiting import wait_until
from vramtop import cli
from vramtop.commands.export import exposure_warning, parse_listen


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1:9464", ("127.0.0.1", 9464)),
        ("9464", ("127.0.0.1", 9464)),
        ("[::1]:9000", ("::1", 9000)),
        ("0.0.0.0:9464", ("0.0.0.0", 9464)),
        ("localhost:0", ("localhost", 0)),
    ],
)
def test_listen_addresses(value: str, expected: tuple[str, int]) -> None:
    assert parse_listen(value) == expected


@pytest.mark.parametrize("value", [":9464", "127.0.0.1:http", "127.0.0.1:70000", "[::1]:"])
def test_bad_listen_addresses_say_what_is_wrong(value: str) -> None:
    with pytest.raises(ValueError, match="--listen"):
        parse_listen(value)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.53", "::1", "localhost"])
def test_loopback_is_not_warned_about(host: str) -> None:
    assert exposure_warning(host) is None


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "desk.lan"])
def test_beyond_loopback_is_warned_about_with_the_fix(host: str) -> None:
    warning = exposure_warning(host)
    assert warning is not None and "127.0.0.1" in warning
    assert ("every network interface" in warning) == (host in ("0.0.0.0", "::"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--listen", "x:y"], "is not a number"),
        (["--interval", "0"], "--interval: must be at least 0.1 seconds"),
        (["--url", "localhost:8000"], "is not an http(s) URL"),
        (["--wsl"], "--wsl only applies with --demo"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path))
    try:
        code = cli.main(["export", *args])
    except SystemExit as exc:  # argparse refusing a value
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    # One line of vramtop's, or argparse's usage and its one line for a value it refuses.
    lines = err.strip().splitlines()
    assert message in lines[-1] and (len(lines) == 1 or lines[0].startswith("usage:"))


def server_errors(page: str) -> float:
    """The page's count of samples whose server could not be read."""
    match = re.search(r'^vramtop_scrape_errors_total\{source="server"\} (\S+)$', page, re.M)
    assert match, page
    return float(match.group(1))


def start_export(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, VRAMTOP_HOME=str(tmp_path / "home"))
    return subprocess.Popen(
        [sys.executable, "-m", "vramtop", "export", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


@pytest.mark.slow
def test_it_serves_a_server_that_is_down_warns_beyond_loopback_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    # Nothing listens on port 9 (discard): the server is down; the GPU may be missing too.
    proc = start_export(tmp_path, "--url", "http://127.0.0.1:9", "--listen", "0.0.0.0:0")
    assert proc.stdout is not None
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            match = re.search(r"serving http://0\.0\.0\.0:(\d+)/metrics", line)
            if match:
                break
        assert match, "".join(lines)
        url = f"http://127.0.0.1:{match.group(1)}/metrics"
        text = wait_until(
            lambda: "vramtop_server_up 0.0" in (page := http.get(url, timeout=10).text) and page,
            deadline_s=60,
            what="the server down on the page",
        )
        assert 'vramtop_scrape_errors_total{source="server"}' in text
        # More failed samples (the error count two higher): still said once.
        first = server_errors(text)
        wait_until(
            lambda: server_errors(http.get(url, timeout=10).text) >= first + 2,
            deadline_s=60,
            what="two more failed samples",
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        out = proc.stdout.read()  # what the line reader buffered, and the rest
    assert proc.returncode == 0
    said = "".join(lines) + out
    assert "for the server at http://127.0.0.1:9 (Ctrl+C to stop)" in said
    assert said.count("the vLLM server at http://127.0.0.1:9 does not answer") == 1
    assert any(
        line.startswith("warning: the metrics are served on every network") for line in lines
    )
    assert "Traceback" not in "".join(lines) + out


def test_a_port_in_use_is_a_message_and_exit_2(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = start_export(
            tmp_path, "--url", "http://127.0.0.1:9", "--listen", f"127.0.0.1:{port}"
        )
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in out and "Traceback" not in out
