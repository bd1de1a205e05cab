"""`--once` and `--url`: what is not known is said so (null, "—"), and a URL that is a
profile's own server is watched as that profile's."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramtop.commands.common import backend_for, profile_serving, same_server
from vramtop.commands.monitor import _text, _uncounted_is_unknown
from vramtop.commands.shared_options import Target
from vramtop.config import profile_from_argv
from vramtop.core.model import GpuReading, Sample
from vramtop.core.snapshot import snapshot
from vramtop.profiles import save_profile


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path))
    return tmp_path


def snap(running: float | None, generation: float | None) -> dict[str, object]:
    data = snapshot(Sample(t=1.0, gpu=GpuReading(error="no GPU")), wsl=False, demo=False)
    data["requests"] = {**data["requests"], "running": running}  # type: ignore[dict-item]
    data["rates"] = {"generation_tps": generation, "prompt_tps": 0.0}
    return data


def test_no_token_counted_while_a_request_runs_is_unknown_not_zero() -> None:
    data = _uncounted_is_unknown(snap(running=1.0, generation=0.0))
    assert data["rates"]["generation_tps"] is None  # type: ignore[index]
    sample = Sample(t=1.0, gpu=GpuReading(error="no GPU"))
    assert "generation — tok/s" in _text(sample, data)  # type: ignore[arg-type]
    # Idle: nothing running, nothing generated, a true zero.
    idle = _uncounted_is_unknown(snap(running=0.0, generation=0.0))
    assert idle["rates"]["generation_tps"] == 0.0  # type: ignore[index]
    busy = _uncounted_is_unknown(snap(running=1.0, generation=31.5))
    assert busy["rates"]["generation_tps"] == 31.5  # type: ignore[index]


def test_the_text_calls_the_servers_budget_budget() -> None:
    """`--once`'s line for the server says the glossary's word, not `util`."""
    data = snap(running=0.0, generation=0.0)
    data["server"] = {**data["server"], "gpu_memory_utilization": 0.93}  # type: ignore[dict-item]
    sample = Sample(t=1.0, gpu=GpuReading(error="no GPU"))
    line = next(x for x in _text(sample, data).splitlines() if x.startswith("server "))  # type: ignore[arg-type]
    assert "budget 0.93" in line and "util" not in line


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("http://127.0.0.1:8000", "http://localhost:8000/", True),
        ("http://127.0.0.1:8000", "http://0.0.0.0:8000", True),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8001", False),
        ("http://gpu-box:8000", "http://127.0.0.1:8000", False),
        ("http://127.0.0.1:8000", "http://127.0.0.1:notaport", False),
    ],
)
def test_same_server(a: str, b: str, same: bool) -> None:
    assert same_server(a, b) is same


def test_a_url_that_is_a_profiles_own_server_is_watched_as_that_profile() -> None:
    save_profile(profile_from_argv("other", ["vllm", "serve", "m", "--port", "8011"]))
    save_profile(profile_from_argv("mine", ["vllm", "serve", "m", "--port", "8012"]))
    assert profile_serving("http://localhost:8012") is not None
    assert profile_serving("http://localhost:8012").name == "mine"  # type: ignore[union-attr]
    assert profile_serving("http://127.0.0.1:9999") is None
    backend, _owned = backend_for(Target(url="http://127.0.0.1:8012"))
    try:
        assert backend.profile_name == "mine" and backend.can_act
    finally:
        backend.close(stop_server=False)
    backend, _owned = backend_for(Target(url="http://127.0.0.1:9999"))
    try:
        assert backend.profile_name is None and not backend.can_act  # watching only
    finally:
        backend.close(stop_server=False)
