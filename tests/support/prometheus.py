"""A real Prometheus for the tests (Debian's `prometheus` package; skipped saying why where it
is not installed): scraping the given targets every second, on a free port, its data in the
test's own directory."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import httpx
import yaml

from tests.export.promtool import tool
from tests.support import http
from tests.support.ports import free_port
from tests.support.waiting import wait_until

START_DEADLINE_S = 60.0


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextlib.contextmanager
def running_prometheus(
    tmp_path: Path,
    targets: Sequence[tuple[str, Mapping[str, str]]],
    *,
    rule_files: Sequence[Path] = (),
    job: str = "vramtop",
) -> Iterator[str]:
    """Prometheus scraping each `(host:port, labels)` every second; yields its base URL once
    it is ready."""
    binary = tool("prometheus")
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": [
            {
                "job_name": job,
                "static_configs": [
                    {"targets": [address], "labels": dict(labels)} for address, labels in targets
                ],
            }
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (tmp_path / "prometheus.log").open("w+")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert proc.poll() is None, Path(log.name).read_text()[-3000:]
        with contextlib.suppress(httpx.HTTPError):
            return http.get(f"{base}/-/ready", timeout=5).status_code == 200
        return False

    try:
        wait_until(ready, deadline_s=START_DEADLINE_S, what="Prometheus to be ready", poll_s=0.5)
        yield base
    finally:
        stop(proc)
        log.close()
