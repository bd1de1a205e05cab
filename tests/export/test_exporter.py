"""The exporter answers from its latest sample: a hung source delays samples, never a scrape."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import start_http_server
from prometheus_client.parser import text_string_to_metric_families

from tests.support import http
from tests.support.waiting import PROCESS_S, wait_until
from vramtop.core.model import GIB, GpuDevice, GpuReading, Sample
from vramtop.export.exporter import Exporter
from vramtop.machines.interface import Frame
from vramtop.machines.machine_backend import MachineBackend
from vramtop.machines.sampler import Sampler

# Prometheus's default scrape timeout: an answer later than this is a failed scrape.
SCRAPE_TIMEOUT_S = 10.0
CARD = GpuReading(devices=(GpuDevice(0, "sim card", 32 * GIB, 10 * GIB, 22 * GIB),), source="sim")


class HangingProbe:
    """A GPU probe that answers `answers` reads, then hangs (a stuck NVML call) until freed."""

    def __init__(self, answers: int) -> None:
        self.answers = answers
        self.reads = 0
        self.hanging = threading.Event()
        self.release = threading.Event()

    def read(self) -> GpuReading:
        self.reads += 1
        if self.reads > self.answers:
            self.hanging.set()
            self.release.wait()
        return CARD

    def close(self) -> None:
        self.release.set()


def wait_for(condition, timeout_s: float = PROCESS_S) -> None:  # type: ignore[no-untyped-def]
    wait_until(condition, deadline_s=timeout_s, what="the condition")


@contextmanager
def serving(exporter: Exporter) -> Iterator[str]:
    httpd, _ = start_http_server(0, addr="127.0.0.1", registry=exporter.registry())
    exporter.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/metrics"
    finally:
        httpd.shutdown()
        httpd.server_close()
        exporter.stop(timeout_s=1.0)


def scrape(url: str) -> dict[str, float]:
    """One scrape within Prometheus's timeout, as {series: value}."""
    response = http.get(url, timeout=SCRAPE_TIMEOUT_S)
    assert response.status_code == 200
    out = {}
    for family in text_string_to_metric_families(response.text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def test_a_hung_gpu_probe_leaves_the_scrape_answering_with_the_last_sample() -> None:
    probe = HangingProbe(answers=1)
    backend = MachineBackend(sampler=Sampler(probe=probe, url=None), supervisor=None)
    exporter = Exporter(backend, interval_s=0.05)
    try:
        with serving(exporter) as url:
            assert probe.hanging.wait(30), "the sampler never reached the hanging read"
            first = scrape(url)
            second = scrape(url)
    finally:
        probe.release.set()
    for seen in (first, second):
        assert seen['vramtop_gpu_memory_used_bytes{gpu="0"}'] == 10 * GIB
        assert seen["vramtop_samples_total"] == 1
    # The numbers are the old sample's, and say so: its timestamp does not move.
    stamp = "vramtop_last_sample_timestamp_seconds"
    assert first[stamp] == second[stamp] > 0


class RefusingBackend:
    """A tick that raises (a bug in a source) every other time."""

    session = None  # a source that keeps no live session
    profile_name = None  # nor a profile (no timeline of steps)

    def __init__(self) -> None:
        self.ticks = 0

    def close(self, stop_server: bool) -> None:
        pass

    def tick(self, log_limit: int = 0) -> Frame:
        self.ticks += 1
        if self.ticks % 2 == 0:
            raise RuntimeError("a source broke")
        return Frame(Sample(t=float(self.ticks), gpu=CARD))


def test_a_failing_sample_is_counted_and_the_previous_one_stays() -> None:
    backend = RefusingBackend()
    exporter = Exporter(backend, interval_s=1.0)
    exporter.sample_once()
    exporter.sample_once()
    text = "".join(
        f"{s.name}{s.labels}={s.value}\n"
        for family in exporter.registry().collect()
        for s in family.samples
    )
    assert "vramtop_scrape_errors_total{'source': 'sampler'}=1.0" in text
    assert "vramtop_samples_total{}=1.0" in text
    assert "vramtop_gpu_memory_used_bytes{'gpu': '0'}=" in text


def silent_server() -> tuple[socket.socket, int]:
    """A TCP port that accepts and never answers: a vLLM hung mid-request."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    return listener, listener.getsockname()[1]


def test_a_vllm_that_never_answers_is_down_and_counted_while_the_card_is_still_served() -> None:
    listener, port = silent_server()
    probe = HangingProbe(answers=10**9)
    sampler = Sampler(probe=probe, url=f"http://127.0.0.1:{port}", timeout_s=0.3)
    backend = MachineBackend(sampler=sampler, supervisor=None)
    exporter = Exporter(backend, interval_s=0.1)
    try:
        with serving(exporter) as url:
            wait_for(lambda: exporter.state().errors.get("server", 0) >= 2)
            seen = scrape(url)
    finally:
        listener.close()
        sampler.close()
    assert seen["vramtop_server_up"] == 0
    assert seen['vramtop_scrape_errors_total{source="server"}'] >= 2
    assert seen['vramtop_gpu_memory_total_bytes{gpu="0"}'] == 32 * GIB
    assert not any(re.match(r"vramtop_(generation|request_decode)_\w*per_second", n) for n in seen)


class FlakyServerBackend(RefusingBackend):
    """The server answers, then not for two samples, then again."""

    def tick(self, log_limit: int = 0) -> Frame:
        from vramtop.core.model import ServerReading

        self.ticks += 1
        up = self.ticks not in (2, 3)
        server = ServerReading("http://box:8000", reachable=up, error=None if up else "timeout")
        return Frame(Sample(t=float(self.ticks), gpu=CARD, server=server))


def test_a_failing_source_is_said_once_when_it_fails_and_once_when_it_answers_again() -> None:
    said: list[str] = []
    exporter = Exporter(FlakyServerBackend(), say=said.append)
    for _ in range(5):
        exporter.sample_once()
    assert said == [
        "the vLLM server at http://box:8000 does not answer: timeout "
        "(still serving; the metrics say so)",
        "server answers again",
    ]
    assert exporter.state().errors == {"server": 2}


class FailingAtFirst(RefusingBackend):
    """A tick that raises for the first `failures` ticks (more than the runner's
    MAX_FAILURES), then answers."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def tick(self, log_limit: int = 0) -> Frame:
        self.ticks += 1
        if self.ticks <= self.failures:
            raise RuntimeError("a source broke")
        return Frame(Sample(t=float(self.ticks), gpu=CARD))


def test_the_sampling_loop_counts_every_failing_tick_and_never_gives_up() -> None:
    from vramtop.machines.headless_runner import MAX_FAILURES

    backend = FailingAtFirst(MAX_FAILURES + 2)
    exporter = Exporter(backend, interval_s=0.01)
    exporter.start()
    try:
        wait_for(lambda: exporter.state().samples >= 1)
    finally:
        assert exporter.stop(timeout_s=5.0)
    assert exporter.state().errors == {"sampler": MAX_FAILURES + 2}
    assert exporter.state().sample is not None
