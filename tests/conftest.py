"""Settings for every test."""

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support import examples

# Compiled modules are kept, also where PYTHONDONTWRITEBYTECODE is set (as in CI's
# environment): each of xdist's workers imports every test module, and pytest rewrites a
# module's asserts anew wherever its rewritten copy was not kept (about 7 s of CPU per worker
# on every run), as Python compiles vramtop's modules anew for each process it starts.
sys.dont_write_bytecode = False

# The properties are judged by what they assert, never by speed: on a loaded machine
# (two cores, other work beside) Hypothesis's own timing checks failed them for being slow.
settings.register_profile("vramtop", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("vramtop")


def pytest_configure(config: pytest.Config) -> None:
    """The fast loop (`-m "not slow and not e2e"`) tries a quarter of each property's examples
    (tests/support/examples.py; `VRAMTOP_TEST_EXAMPLES=full` tries them all), the properties
    that name no count included; the full command tries every example, as CI runs it."""
    if "not slow" in (config.option.markexpr or ""):
        os.environ.setdefault(examples.ENV, "fast")
    if os.environ.get(examples.ENV) == "fast":
        fast = settings(settings.get_profile("vramtop"), max_examples=examples.examples(100))
        settings.register_profile("vramtop-fast", fast)
        settings.load_profile("vramtop-fast")


# Where vramtop would keep its files when VRAMTOP_HOME is unset (platformdirs reads these).
XDG_DIRS = ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME")
# VRAMTOP_HOME as the run started; a wider fixture (the e2e `lab`) that set another keeps it.
STARTED_WITH = os.environ.get("VRAMTOP_HOME")


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test its own vramtop home, and its own XDG directories for a test that unsets
    VRAMTOP_HOME: the suite runs in parallel (pytest-xdist), and a test that wrote to the
    person's real directories would share its profiles, state files and locks with the tests
    running beside it (and leave them behind). A test that wants another home sets its own;
    a module's home (the e2e `lab`, set before this runs) is kept."""
    if os.environ.get("VRAMTOP_HOME") == STARTED_WITH:
        monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    for name in XDG_DIRS:
        monkeypatch.setenv(name, str(tmp_path / "xdg" / name.lower()))
    yield tmp_path / "home"


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: two workers per core the run may use. The tests mostly wait (for processes,
    sockets, a real vLLM) rather than compute: on two cores 4 workers ran the suite ahead of 2
    (the figures: the closing note of the change that made the suite parallel).
    PYTEST_XDIST_AUTO_NUM_WORKERS, as xdist reads it, still decides when set."""
    chosen = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "")
    if chosen.isdigit():
        return int(chosen)
    return 2 * len(os.sched_getaffinity(0))


def pytest_sessionstart(session: pytest.Session) -> None:
    """vramtop's modules compiled once, before the tests start it as a process (hundreds of
    times): where PYTHONDONTWRITEBYTECODE is set, as in CI's environment, no process would
    keep what it compiled, and each would compile anew every module it imports (about a
    fifth of a second of CPU for a `vramtop status`). What pip does on an install; run by
    the first process only (xdist's workers find it done), and quick when nothing changed."""
    if hasattr(session.config, "workerinput"):
        return
    import compileall

    import vramtop

    compileall.compile_dir(Path(vramtop.__file__).parent, quiet=1)
