"""A sample is timed at its /metrics page: the rates divide the counters' increase by the time
between the pages, not between the ends of reads that ask for more than the page."""

from __future__ import annotations

import re

from test_scraper import FakeVllm, _serving

from vramtop.core.model import GpuReading
from vramtop.machines.sampler import Sampler


class NoGpu:
    def read(self) -> GpuReading:
        return GpuReading(error="no GPU here")

    def close(self) -> None:
        pass


def with_generated(page: str, tokens: float) -> str:
    return re.sub(
        r"^(vllm:generation_tokens_total(?:\{[^}]*\})?) \S+$",
        lambda m: f"{m.group(1)} {tokens}",
        page,
        flags=re.M,
    )


def test_a_reads_later_requests_do_not_shorten_the_rates_span() -> None:
    # The clock is the number of requests the server has taken: each a second. The first read
    # asks for the page, then (judging the short page, and once per start) four more; the
    # second read for the page alone.
    with _serving(FakeVllm()) as server:
        server.metrics = with_generated(server.metrics, 1000.0)
        sampler = Sampler(
            probe=NoGpu(), url=server.url, clock=lambda: float(sum(server.hits.values()))
        )
        try:
            first = sampler.tick()
            asked = sum(server.hits.values())
            server.metrics = with_generated(server.metrics, 1500.0)
            second = sampler.tick()
        finally:
            sampler.close()
    assert asked >= 3  # the first read asked for more than its page
    # The pages were answered at requests 1 and asked + 1: 500 tokens over `asked` seconds.
    assert (first.t, second.t) == (1.0, asked + 1.0)
    assert second.rates.generation_tps == 500 / asked
