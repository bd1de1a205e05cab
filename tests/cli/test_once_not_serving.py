"""`vramtop --once` when the server does not serve: down, stopped, frozen (SIGSTOP) or
refusing (HTTP 401). The snapshot is printed all the same (the GPU, the reason, the time, the
open findings) and the exit code says the server is not serving (ExitCode.NOT_SERVING)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.support.cli_run import run_apart
from tests.support.ports import free_port
from vramtop.outcomes import ExitCode

FAKE_SERVER = Path(__file__).resolve().parents[1] / "supervisor" / "fake_vllm.py"


def _vramtop(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VRAMTOP_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "vramtop", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
    )


def _assert_snapshot_of_a_server_not_serving(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == ExitCode.NOT_SERVING == 6, done.stderr
    assert "Traceback" not in done.stderr
    data = json.loads(done.stdout)
    # What nvidia-smi and gpustat would print is still there (here: why the GPU is unread).
    assert "gpus" in data and "gpu_source" in data
    assert data["gpus"] or data["gpu_error"]
    assert data["server"]["healthy"] is False and data["server"]["error"]
    stamp = datetime.fromisoformat(data["query_time"])
    assert stamp.tzinfo is not None
    assert isinstance(data["findings"], list)
    assert "the vLLM server at" in done.stderr and data["server"]["error"] in done.stderr
    return data


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "home"
    monkeypatch.setenv("VRAMTOP_HOME", str(home))
    yield home
    for proc in psutil.process_iter():  # whatever this test launched, even if it failed
        with contextlib.suppress(psutil.Error):
            env = proc.environ()
            if str(tmp_path) in env.get("VRAMTOP_HOME", "") + env.get("FAKE_LEDGER_DIR", ""):
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGKILL)


@pytest.fixture
def profile_port(home: Path, tmp_path: Path) -> int:
    """A default profile whose server is the supervisor tests' stand-in for vLLM."""
    from vramtop.config import Profile
    from vramtop.profiles import save_profile

    port = free_port()
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    save_profile(
        Profile(
            name="fake",
            argv=[sys.executable, str(FAKE_SERVER), "fake-model", "--port", str(port)],
            env={"FAKE_LEDGER_DIR": str(ledger), "FAKE_STARTUP_S": "0.2"},
            port=port,
            stop_timeout_s=3,
        )
    )
    return port


def test_a_profiles_server_that_is_down_still_gets_its_snapshot(
    home: Path, profile_port: int
) -> None:
    data = _assert_snapshot_of_a_server_not_serving(_vramtop(home, "--once", "--json"))
    assert data["server"]["reachable"] is False
    assert "refused" in data["server"]["error"]
    assert data["server"]["url"].endswith(f":{profile_port}")


@pytest.mark.slow
def test_a_url_that_does_not_answer_is_unreachable(home: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    data = _assert_snapshot_of_a_server_not_serving(
        _vramtop(home, "--once", "--json", "--url", url)
    )
    assert data["server"]["state"] == "unreachable" and data["server"]["reachable"] is False
    text = _vramtop(home, "--once", "--url", url)
    assert text.returncode == ExitCode.NOT_SERVING
    assert "unreachable: " in text.stdout, text.stdout


@pytest.mark.slow
def test_a_stopped_and_a_frozen_server_are_said_so(home: Path, profile_port: int) -> None:
    # The start, the look at it serving and the stop run in the test's own process (each
    # process of its own cost half a second of CPU); the snapshots not serving are processes.
    code, _, err = run_apart(["start"])
    assert code == 0, err
    pid = json.loads(run_apart(["status", "--json"])[1])["pid"]
    code, out, err = run_apart(["--once", "--json"])
    assert code == 0, err
    assert json.loads(out)["server"]["healthy"] is True

    os.kill(pid, signal.SIGSTOP)  # frozen: its port still accepts, nothing answers
    try:
        frozen = _assert_snapshot_of_a_server_not_serving(_vramtop(home, "--once", "--json"))
        assert frozen["server"]["state"] == "running" and frozen["server"]["reachable"] is False
        assert "timed out" in frozen["server"]["error"]
        text = _vramtop(home, "--once")
        assert text.returncode == ExitCode.NOT_SERVING
        assert "running, not reachable: timed out" in text.stdout, text.stdout
    finally:
        os.kill(pid, signal.SIGCONT)

    code, _, err = run_apart(["stop"])
    assert code == 0, err
    data = _assert_snapshot_of_a_server_not_serving(_vramtop(home, "--once", "--json"))
    assert data["server"]["state"] == "stopped"
    text = _vramtop(home, "--once")
    assert text.returncode == ExitCode.NOT_SERVING
    assert "stopped: connection refused" in text.stdout, text.stdout


@pytest.fixture
def refusing() -> Iterator[str]:
    """A server (or a proxy before one) that answers every request with HTTP 401."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            body = b'{"error": "Unauthorized"}'
            self.send_response(401)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@pytest.mark.slow
def test_a_server_answering_401_is_not_up(home: Path, refusing: str) -> None:
    data = _assert_snapshot_of_a_server_not_serving(
        _vramtop(home, "--once", "--json", "--url", refusing)
    )
    assert "HTTP 401" in data["server"]["error"]
    text = _vramtop(home, "--once", "--url", refusing)
    assert text.returncode == ExitCode.NOT_SERVING
    assert ": up" not in text.stdout, text.stdout
    assert "not serving: /metrics answered HTTP 401" in text.stdout, text.stdout
