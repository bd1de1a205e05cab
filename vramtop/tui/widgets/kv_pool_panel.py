"""KV pool: size in GiB and tokens, usage now and its history, concurrency, preemptions."""

from __future__ import annotations

from collections import deque

from textual.content import Content

from vramtop.core.model import GIB, Sample
from vramtop.tui.format import count, server_gone
from vramtop.tui.widgets.text_panel import HISTORY, Detail, Facts, Spark, TextPanel


class KvPoolPanel(TextPanel):
    """Rows: size, usage, usage history, concurrency and preemptions, blocks and dtype."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        # The usage sparkline's history, one value a new sample (0 where none is reported).
        self._usage: deque[float] = deque(maxlen=HISTORY)
        self._last_t: float | None = None

    def on_mount(self) -> None:
        self.border_title = "KV pool"

    def show(self, sample: Sample) -> None:
        server = sample.server
        metrics = server.metrics if server else None
        if sample.t != self._last_t:  # the same frame again (a replay's last) adds nothing
            self._last_t = sample.t
            self._usage.append((metrics.kv_cache_usage if metrics else None) or 0.0)
        cache = metrics.cache if metrics else None
        startup = sample.startup
        pool_bytes = cache.kv_cache_memory_bytes if cache else None
        pool_gib = (
            pool_bytes / GIB if pool_bytes else (startup.available_kv_gib if startup else None)
        )
        tokens = (cache.kv_cache_size_tokens if cache else None) or (
            startup.kv_cache_tokens if startup else None
        )
        size: Content | str = (
            f"{pool_gib:.2f} GiB · {count(tokens)} tokens"
            if pool_gib is not None
            else "size not known yet (waiting for the startup log or /metrics)"
        )
        gone = server_gone(sample)
        if gone and pool_gib is not None:
            # The dead server's pool: the next start sizes its own.
            size = Content.assemble((f"{size} ", "$text-muted"), ("(stale)", "$warning"))
        usage: Content | str
        if metrics is None or metrics.kv_cache_usage is None:
            usage = _no_metrics(sample)
        else:
            stale = " (stale)" if (server and server.stale) or gone else ""
            usage = f"usage {metrics.kv_cache_usage * 100:.1f} %{stale}"
        concurrency = (cache.kv_cache_max_concurrency if cache else None) or (
            startup.max_concurrency if startup else None
        )
        max_len = (server.max_model_len if server else None) or (
            sample.info.max_model_len if sample.info else None
        )
        preemptions = metrics.preemptions_total if metrics else None
        conc = f"{concurrency:.2f}×" if concurrency is not None else "—"
        at_len = f" at {max_len:,}" if max_len else ""
        more = Content.assemble(
            f"{conc}{at_len} tok · ",
            (count(preemptions), "bold $error" if preemptions else ""),
            " preempted",
        )
        blocks = cache.num_gpu_blocks if cache else None
        dtype = (cache.cache_dtype if cache else None) or (
            sample.info.kv_cache_dtype if sample.info else None
        )
        block_size = f" of {cache.block_size}" if cache and cache.block_size else ""
        blocks_line = Content.styled(
            f"{count(blocks)} blocks{block_size} · KV dtype {dtype or '—'}", "$text-muted"
        )
        # Each row breaks between its facts (a fact wider than the panel wraps) where the
        # panel is narrow: never cut.
        self.set_rows(
            [
                Facts.split(size),
                Facts.split(usage),
                Detail(Spark(tuple(self._usage), ceiling=1.0)),
                Facts.split(more),
                Facts.split(blocks_line),
            ]
        )


def _no_metrics(sample: Sample) -> Content:
    server = sample.server
    if server is None or not server.reachable:
        reason = server.error if server and server.error else "not reachable"
        return Content.assemble(("metrics: ", "$text-muted"), (reason, "$warning"))
    return Content.styled("usage not reported by this vLLM", "$text-muted")
