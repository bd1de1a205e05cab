"""`vramtop --once --json --url`: its rate window runs while the rest of the answer loads, and
it still prints a rate (a real process against a small vLLM stand-in on localhost)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

TOKENS_PER_READ = 100  # the stand-in's generation counter grows this much at each /metrics


def _page(tokens: int) -> str:
    return (
        "# TYPE vllm:generation_tokens counter\n"
        f'vllm:generation_tokens_total{{engine="0",model_name="tiny"}} {tokens}.0\n'
        "# TYPE vllm:prompt_tokens counter\n"
        'vllm:prompt_tokens_total{engine="0",model_name="tiny"} 10.0\n'
        'vllm:num_requests_running{engine="0",model_name="tiny"} 1.0\n'
    )


@pytest.fixture
def server() -> Iterator[str]:
    reads = [0]
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if self.path == "/metrics":
                with lock:
                    reads[0] += 1
                    body = _page(TOKENS_PER_READ * reads[0])
            elif self.path == "/version":
                body = json.dumps({"version": "0.32.0"})
            elif self.path == "/v1/models":
                body = json.dumps({"data": [{"id": "tiny", "max_model_len": 512}]})
            else:
                body = ""
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

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


# The command as people run it, with a note on stderr of what was loaded when the first
# reading of the server began.
_RUN = """
import sys
from vramtop.sources import scraper
read = scraper.Scraper.read_sync
seen = []
def noted(self):
    if not seen:
        seen.append(1)
        later = ("vramtop.session.live", "vramtop.core.diagnosis.diagnoser")
        print("LOADED " + ",".join(n for n in later if n in sys.modules), file=sys.stderr)
    return read(self)
scraper.Scraper.read_sync = noted
from vramtop import entry
sys.argv[0] = "vramtop"
entry.run()
"""


def test_the_first_reading_begins_before_the_diagnosis_loads_and_a_rate_is_printed(
    tmp_path: Path, server: str
) -> None:
    env = {**os.environ, "VRAMTOP_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", _RUN, "--once", "--json", "--url", server],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "LOADED \n" in done.stderr, done.stderr  # nothing of the diagnosis yet
    data = json.loads(done.stdout)
    assert data["server"]["reachable"] is True and data["server"]["version"] == "0.32.0"
    assert data["server"]["model"] == "tiny"
    # Two reads of the counter, TOKENS_PER_READ apart, at least the window (1 s) apart.
    rate = data["rates"]["generation_tps"]
    assert rate is not None and 0 < rate <= TOKENS_PER_READ
    # Counts are integers, as the page's 1.0 means.
    assert data["requests"]["running"] == 1 and isinstance(data["requests"]["running"], int)
    assert data["server"]["healthy"] is True


@pytest.mark.slow
def test_a_window_of_five_seconds_or_more_still_gives_a_rate(tmp_path: Path, server: str) -> None:
    # The README advises longer windows on a busy machine: the rate timeline's own 5 s window
    # must not drop the first reading of one.
    env = {**os.environ, "VRAMTOP_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "vramtop", "--once", "--json", "--interval", "5", "--url", server],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    rate = json.loads(done.stdout)["rates"]["generation_tps"]
    # TOKENS_PER_READ over a window of at least 5 s.
    assert rate is not None and 0 < rate <= TOKENS_PER_READ / 5
