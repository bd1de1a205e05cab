"""A load generator that plays a coding agent: streaming chat requests with short pauses.

`python -m vramtop.sim.load --url URL [--concurrency 1|2|3] [--agent] [--seed N] [--api-key K]`
runs until SIGTERM/SIGINT (or `--requests N`, or, with `--parent PID`, until that parent
process is gone). `LoadGenerator` does the same from threads in-process. Prompts are a few
thousand tokens (an agent resends its context), answers 64–512 tokens.

`--agent` behaves like a real coding agent: each stream's context grows turn by turn and is
re-read whole every turn (so prefill comes every few seconds, never stopping), and how many
streams run at once changes every `--phase` seconds (between 1 and `--concurrency`), as an
agent fans out sub-tasks and gathers them again.

The demo runs it as a process of its own, as a real agent is: a streaming client parses every
token it receives, and inside the console's process it would compete with the console for the
interpreter (and its CPU would be counted as the console's).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import threading

import httpx

from vramtop.sim.world_protocol import LOAD_API_KEY_ENV

WORDS = (
    "file",
    "test",
    "error",
    "def",
    "class",
    "return",
    "import",
    "path",
    "diff",
    "shell",
    "pytest",
    "failed",
    "edit",
    "line",
    "value",
    "config",
    "agent",
    "tool",
    "result",
)


class LoadGenerator:
    """One or two workers, each sending one streaming chat request at a time."""

    def __init__(
        self,
        url: str,
        *,
        concurrency: int = 1,
        seed: int = 0,
        api_key: str | None = None,
        pause_s: tuple[float, float] = (0.3, 2.0),
        max_requests: int | None = None,
        agent: bool = False,
        phase_s: tuple[float, float] = (20.0, 60.0),
    ) -> None:
        self.url = url.rstrip("/")
        self.concurrency = concurrency
        self.seed = seed
        self.api_key = api_key
        self.pause_s = pause_s
        self.max_requests = max_requests
        self.agent = agent
        self.phase_s = phase_s
        # Agent mode: how many streams may run now (the others wait their turn).
        self.active = concurrency
        self.stopping = threading.Event()
        self.completed = 0
        self.tokens = 0
        self.errors = 0
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self) -> LoadGenerator:
        if self.agent and self.concurrency > 1:
            self.active = 1
            t = threading.Thread(target=self._phases, daemon=True, name="load-phases")
            t.start()
            self._threads.append(t)
        for i in range(self.concurrency):
            t = threading.Thread(target=self._worker, args=(i,), daemon=True, name=f"load-{i}")
            t.start()
            self._threads.append(t)
        return self

    def stop(self, timeout_s: float = 2.0) -> None:
        self.stopping.set()
        for t in self._threads:
            t.join(timeout_s)

    def wait(self) -> None:
        # Short joins: a stop (SIGTERM) is noticed within 50 ms, so the command that stops
        # the agent does not wait on it.
        for t in self._threads:
            while t.is_alive() and not self.stopping.is_set():
                t.join(0.05)

    def _done_enough(self) -> bool:
        return self.max_requests is not None and self.completed >= self.max_requests

    def _phases(self) -> None:
        """Agent mode: change how many streams run at once, now and then."""
        rng = random.Random(self.seed * 1000 + 999)
        while not self.stopping.wait(rng.uniform(*self.phase_s)):
            choices = [n for n in range(1, self.concurrency + 1) if n != self.active]
            self.active = rng.choice(choices)

    def _worker(self, index: int) -> None:
        rng = random.Random(self.seed * 1000 + index)
        context: list[str] = []
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        timeout = httpx.Timeout(10.0, read=60.0)
        # trust_env=False: a desktop's HTTP(S)_PROXY must not carry requests for a local server.
        # TLS settings only for https: building them costs ~80 ms of CPU a stream, and the
        # demo runs its agent inside the console.
        with httpx.Client(
            headers=headers,
            timeout=timeout,
            trust_env=False,
            verify=self.url.startswith("https://"),
        ) as client:
            while not self.stopping.is_set() and not self._done_enough():
                if index >= self.active:
                    self.stopping.wait(0.2)  # this stream is not needed in this phase
                    continue
                try:
                    n = self._one_request(client, rng, self._context(context, rng))
                    with self._lock:
                        self.completed += 1
                        self.tokens += n
                except (httpx.HTTPError, ValueError, AttributeError):  # AttributeError: odd JSON
                    with self._lock:
                        self.errors += 1
                    self.stopping.wait(1.0)  # the server may be restarting; try again soon
                    continue
                self.stopping.wait(rng.uniform(*self.pause_s))

    def _context(self, context: list[str], rng: random.Random) -> str:
        """The prompt of this turn: a fresh one, or (agent) the task's context so far plus
        what the last turn added, re-read whole; a finished task starts a new context."""
        if not self.agent:
            return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1500, 5000)))
        if not context or len(context) > 12000:
            context[:] = [rng.choice(WORDS) for _ in range(rng.randint(2000, 4000))]
        else:
            context += [rng.choice(WORDS) for _ in range(rng.randint(100, 400))]
        return " ".join(context)

    def _one_request(self, client: httpx.Client, rng: random.Random, context: str) -> int:
        body = {
            "messages": [
                {"role": "system", "content": "You are a coding agent."},
                {"role": "user", "content": context},
            ],
            "max_tokens": rng.randint(64, 256) if self.agent else rng.randint(64, 512),
            "stream": True,
        }
        chunks = 0
        with client.stream("POST", f"{self.url}/v1/chat/completions", json=body) as resp:
            resp.raise_for_status()
            for line in resp.iter_lines():
                if self.stopping.is_set():
                    break  # closing the stream tells the server to stop generating
                if not line.startswith("data: "):
                    continue
                data = line[len("data: ") :]
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                for choice in chunk.get("choices", []):
                    if choice.get("delta", {}).get("content"):
                        chunks += 1
        return chunks


API_KEY_ENV = LOAD_API_KEY_ENV
PARENT_CHECK_S = 0.5


def _stop_with_parent(gen: LoadGenerator, parent: int) -> None:
    """An agent left behind by a console that died (even by SIGKILL) must not go on loading
    the server: once the parent is gone this process has been handed to another one."""
    while not gen.stopping.wait(PARENT_CHECK_S):
        if os.getppid() != parent:
            gen.stopping.set()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vramtop.sim.load", description=__doc__)
    parser.add_argument("--url", required=True, help="the server, e.g. http://127.0.0.1:8000")
    parser.add_argument("--concurrency", type=int, choices=(1, 2, 3), default=1)
    parser.add_argument(
        "--agent",
        action="store_true",
        help="play a real coding agent: a growing context re-read every turn, and between 1 "
        "and --concurrency streams at once, changing every --phase seconds",
    )
    parser.add_argument(
        "--phase",
        nargs=2,
        type=float,
        default=(20.0, 60.0),
        metavar=("MIN_S", "MAX_S"),
        help="agent mode: how long a number of streams lasts (default 20 60)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--api-key",
        default=os.environ.get(API_KEY_ENV),
        help=f"the server's --api-key (or set {API_KEY_ENV}, which keeps it out of `ps`)",
    )
    parser.add_argument("--requests", type=int, default=None, help="stop after N requests")
    parser.add_argument(
        "--pause",
        nargs=2,
        type=float,
        default=(0.3, 2.0),
        metavar=("MIN_S", "MAX_S"),
        help="the agent's pause between requests, drawn between these (default 0.3 2.0)",
    )
    parser.add_argument(
        "--parent", type=int, default=None, help="stop when this parent process has gone"
    )
    args = parser.parse_args(argv)
    low, high = args.pause
    if not 0 <= low <= high:
        parser.error("--pause wants MIN_S <= MAX_S, both >= 0")
    gen = LoadGenerator(
        args.url,
        concurrency=args.concurrency,
        seed=args.seed,
        api_key=args.api_key,
        pause_s=(low, high),
        max_requests=args.requests,
        agent=args.agent,
        phase_s=(max(0.1, args.phase[0]), max(0.1, args.phase[0], args.phase[1])),
    )
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: gen.stopping.set())
    if args.parent is not None:
        threading.Thread(target=_stop_with_parent, args=(gen, args.parent), daemon=True).start()
    gen.start().wait()
    gen.stop()
    print(f"load: {gen.completed} requests, {gen.tokens} chunks, {gen.errors} errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
