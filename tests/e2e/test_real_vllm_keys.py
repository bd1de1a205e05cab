"""The real vLLM with an API key kept in a variable of the person's choosing, and a restart
confirmed under streaming load.

One server for the module: started from a profile whose key lives in `E2E_KEY_VAR` (vLLM
reads only `--api-key` or `VLLM_API_KEY`), checked for a 401 without the key and never in
argv; then restarted while streaming requests run, as a person confirming `r` twice does.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import httpx
import psutil
import pytest

from tests.e2e.conftest import SERVED_NAME, Lab, vllm_argv
from tests.support import http
from tests.support.ports import free_port
from tests.support.waiting import wait_until
from vramtop.config import Profile, profile_from_argv
from vramtop.core.model import ServerState
from vramtop.supervisor import Supervisor, state

pytestmark = pytest.mark.timeout(900)

START_TIMEOUT_S = 420.0
KEY_VAR = "E2E_KEY_VAR"
KEY = f"sk-e2e-{uuid.uuid4().hex[:12]}"


class Streams:
    """Streaming completions on a few threads until stopped (a request cut short, by the
    restart or by a read timed out on a loaded machine, is sent again)."""

    def __init__(self, url: str, n: int = 3) -> None:
        self.url = url
        self.stop = threading.Event()
        self.chunks = 0
        self.errors: list[str] = []  # what ended a request early, for a failure's message
        # Requests whose answer has begun and not ended, as the clients see them. (vLLM
        # 0.32's gauge of running requests read 0 at every ask for 120 s of this load on a
        # busy machine, with 116,764 lines streamed.)
        self.streaming = 0
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(n)]

    def start(self) -> Streams:
        for thread in self.threads:
            thread.start()
        return self

    def _run(self) -> None:
        body = {
            "model": SERVED_NAME,
            "prompt": "hello world the model server token memory",
            "max_tokens": 400,
            "ignore_eos": True,
            "stream": True,
        }
        headers = {"Authorization": f"Bearer {KEY}"}
        while not self.stop.is_set():
            try:
                with (
                    httpx.Client(timeout=30, headers=headers) as client,
                    client.stream("POST", f"{self.url}/v1/completions", json=body) as resp,
                ):
                    if resp.status_code != 200:
                        self.errors.append(f"HTTP {resp.status_code}")
                    elif self._stream(resp):
                        return
                    else:
                        continue
            except httpx.HTTPError as exc:
                # Cut by the restart, or, on a loaded machine, a read timed out before it: the
                # next request goes once a moment has passed, until the load is stopped.
                self.errors.append(repr(exc))
            self.stop.wait(0.2)

    def _stream(self, resp: httpx.Response) -> bool:
        """Read one answer, counted as streaming from its first line to its end; whether the
        load was stopped meanwhile."""
        begun = False
        try:
            for _line in resp.iter_lines():
                self.chunks += 1
                if not begun:
                    begun = True
                    with self._lock:
                        self.streaming += 1
                if self.stop.is_set():
                    return True
            return False
        finally:
            if begun:
                with self._lock:
                    self.streaming -= 1


@pytest.fixture(scope="module")
def keyed(lab: Lab) -> Iterator[tuple[Supervisor, Profile]]:
    port = free_port()
    profile = profile_from_argv(
        "keyed", vllm_argv(port), env=dict(lab.env), api_key_env=KEY_VAR, stop_timeout_s=20
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_VAR, KEY)
        mp.delenv("VLLM_API_KEY", raising=False)
        sup = Supervisor(profile)
        result = sup.start(timeout_s=START_TIMEOUT_S)
        assert result.ok, result.message
        try:
            yield sup, profile
        finally:
            sup.stop()


def test_a_key_in_another_variable_protects_the_real_server(
    keyed: tuple[Supervisor, Profile],
) -> None:
    sup, profile = keyed
    url = profile.url
    assert http.get(f"{url}/v1/models", timeout=30).status_code == 401
    ok = http.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    assert ok.status_code == 200 and ok.json()["data"][0]["id"] == SERVED_NAME
    info = sup.status()
    for pid in info.pids:
        try:
            proc = psutil.Process(pid)
            assert KEY not in " ".join(proc.cmdline())  # never where `ps` shows it
        except psutil.Error:
            continue
    api = psutil.Process(info.pid or 0)
    assert api.environ().get("VLLM_API_KEY") == KEY
    assert KEY not in state.state_path("keyed").read_text()
    assert KEY not in sup.log_path.read_text()


def test_a_restart_confirmed_under_load_ends_the_tree_and_comes_back_keyed(
    keyed: tuple[Supervisor, Profile],
) -> None:
    sup, profile = keyed
    url = profile.url
    load = Streams(url).start()
    try:
        # Requests in flight, as the clients see them (an answer begun and not ended).
        wait_until(
            lambda: load.streaming >= 1,
            deadline_s=120,
            what=lambda: f"the load running ({load.chunks} lines read; {load.errors[-3:]})",
        )
        old = sup.status()
        old_tree = [psutil.Process(p) for p in old.pids if psutil.pid_exists(p)]
        result = sup.restart(requests_lost=True, timeout_s=START_TIMEOUT_S)
    finally:
        load.stop.set()
    assert result.ok, result.message
    assert not [p for p in old_tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    info = sup.status()
    assert info.state is ServerState.RUNNING and info.pid != old.pid
    assert http.get(f"{url}/v1/models", timeout=30).status_code == 401
