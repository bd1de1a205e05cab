"""A tiny stand-in for a vLLM server, for supervisor tests that do not need the simulator.

Prints vLLM-like startup lines, serves /health and /metrics on --port, and starts a child in
its own process group that (like vLLM's EngineCore) survives a SIGKILL of its parent. The
child "holds GPU memory" by keeping a file named after its pid in FAKE_LEDGER_DIR.
"""

from __future__ import annotations

import argparse
import http.server
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

CHILD = """
import os, signal, sys, time
from pathlib import Path
held = Path(sys.argv[1]) / str(os.getpid())
held.write_text("1")
def leave(*_):
    held.unlink(missing_ok=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, leave)
while True:
    time.sleep(0.2)  # not a wait: the engine holds its memory until SIGTERM
"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", nargs="?")
    parser.add_argument("--model", dest="model_flag")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument("--kv-cache-dtype", default="auto")
    parser.add_argument("--api-key")
    args = parser.parse_args()
    ledger = Path(os.environ.get("FAKE_LEDGER_DIR", "."))
    startup_s = float(os.environ.get("FAKE_STARTUP_S", "0.2"))
    free = float(os.environ.get("FAKE_FREE_FRACTION", "1.0"))
    pid = os.getpid()

    def say(text: str) -> None:
        print(f"(APIServer pid={pid}) INFO {text}", flush=True)

    if args.gpu_memory_utilization > free:
        total = 31.84
        print(
            f"ValueError: Free memory on device cuda:0 ({free * total:.2f}/{total:.2f} GiB) on "
            f"startup is less than desired GPU memory utilization "
            f"({args.gpu_memory_utilization}, {args.gpu_memory_utilization * total:.2f} GiB). "
            "Decrease GPU memory utilization or reduce GPU memory used by other processes.",
            flush=True,
        )
        return 1
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(ledger)])
    # A test's own lines of vLLM's, read at each start (FAKE_START_LINES: a file), first.
    lines = os.environ.get("FAKE_START_LINES")
    for line in Path(lines).read_text().splitlines() if lines else []:
        say(line)
    # not a wait: the fake's startup, a third of FAKE_STARTUP_S per phase, as vLLM's takes time
    say("Loading weights took 0.1 seconds")
    time.sleep(startup_s / 3)  # not a wait: loading
    say("Memory profiling takes 0.1 seconds")
    time.sleep(startup_s / 3)  # not a wait: profiling
    say("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)")
    time.sleep(startup_s / 3)  # not a wait: capturing
    util = args.gpu_memory_utilization

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                body = b""
            elif self.path == "/metrics":
                body = (
                    f'vllm:cache_config_info{{gpu_memory_utilization="{util}",'
                    f'cache_dtype="{args.kv_cache_dtype}"}} 1.0\n'
                ).encode()
            else:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: object) -> None:
            pass

    http.server.ThreadingHTTPServer.allow_reuse_address = True
    server = http.server.ThreadingHTTPServer((args.host, args.port), Handler)

    # The handler only sets a flag: the main thread does the work (nothing re-entrant runs
    # inside a signal handler).
    leaving = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: leaving.set())
    say(f"Starting vLLM server on http://{args.host}:{args.port}")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    while not leaving.wait(0.05):
        pass
    child.terminate()
    child.wait()
    say("Shutting down")
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
