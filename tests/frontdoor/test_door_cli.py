"""Bad arguments to the door are a message and exit 2, never a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.frontdoor.test_door_holding import wait_for
from tests.support import http
from tests.support.ports import free_port
from vramtop.frontdoor.__main__ import main as door_main
from vramtop.frontdoor.stats_file import STATS_KEYS


def door(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vramtop.frontdoor", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def refused(*args: str) -> subprocess.CompletedProcess[str]:
    """The door's `main` in the test's own process, as `python -m vramtop.frontdoor ARGS`
    runs it (`sys.exit(main())`), for arguments it refuses before serving: its exit code and
    what it printed. A process of its own spent about 0.3 s of CPU (Python, aiohttp) to say
    one line; `door` starts one where the process is the subject (its exit code, an address
    in use)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = door_main(list(args))
        except SystemExit as exc:  # argparse's refusals
            code = int(exc.code or 0)
    argv = ["vramtop.frontdoor", *args]
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def token_file(tmp_path: Path, mode: int, text: str = "tok") -> Path:
    path = tmp_path / "door.token"
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--listen", "8000"], "is not HOST:PORT"),
        (["--listen", "127.0.0.1:http"], "is not a number"),
        (["--listen", "127.0.0.1:70000"], "1-65535"),
        (["--listen", "127.0.0.1:8000", "--upstream", "127.0.0.1:8001"], "http://HOST:PORT"),
        (["--listen", "127.0.0.1:8000", "--upstream", "http://127.0.0.1:8001/v1"], "no path"),
        (["--listen", "127.0.0.1:8000", "--upstream", "http://u:p@127.0.0.1:1"], "nothing else"),
        (["--listen", "127.0.0.1:8000", "--hold-s", "0"], "more than 0"),
        (["--listen", "127.0.0.1:8000", "--hold-s", "nan"], "more than 0"),
        (["--listen", "127.0.0.1:8000", "--hold-s", "ten"], "not a number"),
        ([], "--listen"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(args: list[str], words: str) -> None:
    done = refused(*args)
    assert done.returncode == 2
    assert words in done.stderr
    assert "Traceback" not in done.stderr


def test_a_refusal_is_the_processs_exit_2_and_one_message() -> None:
    done = door("--listen", "8000")
    assert done.returncode == 2 and "is not HOST:PORT" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    shared = token_file(tmp_path, 0o644)
    done = refused("--listen", f"127.0.0.1:{free_port()}", "--token-file", str(shared))
    assert done.returncode == 2 and "chmod 600" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_token_file_another_user_owns_is_refused(tmp_path: Path) -> None:
    theirs = token_file(tmp_path, 0o600)
    os.chown(theirs, 65534, -1)  # (nobody's: the tests may run as root)
    done = refused("--listen", f"127.0.0.1:{free_port()}", "--token-file", str(theirs))
    assert done.returncode == 2 and "belongs to another user" in done.stderr
    assert "chown" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("case", ["missing", "empty", "link", "directory"])
def test_an_unusable_token_file_is_refused(tmp_path: Path, case: str) -> None:
    path = tmp_path / "door.token"
    if case == "empty":
        token_file(tmp_path, 0o600, "  \n")
    elif case == "link":
        os.symlink(token_file(tmp_path, 0o600).rename(tmp_path / "real"), path)
    elif case == "directory":  # was exit 1: "IsADirectoryError: [Errno 21] Is a directory: 3"
        path.mkdir(mode=0o700)
    done = refused("--listen", f"127.0.0.1:{free_port()}", "--token-file", str(path))
    assert done.returncode == 2 and "token file" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_address_in_use_is_said_as_such() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = door("--listen", f"127.0.0.1:{port}", "--upstream", "http://127.0.0.1:9")
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


def stats_args(path: Path) -> list[str]:
    return ["--listen", f"127.0.0.1:{free_port()}", "--stats-file", str(path)]


@pytest.mark.parametrize("case", ["foreign", "json", "link", "link-to-stats", "big", "dir"])
def test_a_stats_file_the_door_did_not_write_is_refused(tmp_path: Path, case: str) -> None:
    target = tmp_path / "passwd"
    target.write_text("root:x:0:0:root:/root:/bin/bash\n")
    path = tmp_path / "stats.json"
    if case == "foreign":
        path = target
    elif case == "json":
        path.write_text('{"pid": 1, "name": "some other program"}')
    elif case == "link":
        path.symlink_to(target)
    elif case == "link-to-stats":
        (tmp_path / "real.json").write_text(json.dumps(dict.fromkeys(STATS_KEYS, 0)))
        path.symlink_to(tmp_path / "real.json")
    elif case == "big":
        path.write_text(json.dumps({**dict.fromkeys(STATS_KEYS, 0), "pad": "x" * 70_000}))
    elif case == "dir":
        path.mkdir()
    before = target.read_bytes()
    done = refused(*stats_args(path))
    assert done.returncode == 2
    assert f"--stats-file {path}" in done.stderr
    assert "Traceback" not in done.stderr
    assert target.read_bytes() == before
    assert path.is_symlink() == case.startswith("link")


def test_a_stats_file_in_a_missing_directory_is_refused(tmp_path: Path) -> None:
    done = refused(*stats_args(tmp_path / "nowhere" / "stats.json"))
    assert done.returncode == 2 and "does not exist" in done.stderr


def test_a_previous_stats_file_is_replaced(door_factory: Any, tmp_path: Path) -> None:
    path = tmp_path / "stats.json"
    path.write_text(json.dumps({**dict.fromkeys(STATS_KEYS, 0), "pid": 1}))
    path.chmod(0o600)
    d = door_factory(f"http://127.0.0.1:{free_port()}", "--stats-file", str(path))
    assert wait_for(lambda: json.loads(path.read_text())["pid"] == d.proc.pid)


def test_a_file_put_in_the_stats_file_place_is_left_alone(
    door_factory: Any, tmp_path: Path
) -> None:
    path = tmp_path / "stats.json"
    d = door_factory(f"http://127.0.0.1:{free_port()}", "--stats-file", str(path))
    assert wait_for(lambda: path.exists())
    path.unlink()
    path.write_text("someone else's\n")  # a new file in its place, between two writes
    http.get(d.url + "/nowhere")  # a change the door would write out
    assert wait_for(lambda: "stopped writing its stats" in d.text())
    assert path.read_text() == "someone else's\n"
