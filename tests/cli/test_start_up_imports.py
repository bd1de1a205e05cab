"""What the console imports before its first frame: only what that frame needs.

Measured by bench/bench_first_frame.py; this checks the modules, which a later import at the
top of a module would bring back without anyone noticing (each costs tens of milliseconds of
CPU before anything is drawn)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Loaded later, where they are used: validation of profiles, the GPU library (in the reader,
# after the first frame), YAML (for a YAML theme), the supervisor's HTTP client and process
# tree, and the exporter's Prometheus client.
NOT_BEFORE_THE_FIRST_FRAME = ("pydantic", "pynvml", "yaml", "httpx", "psutil", "prometheus_client")
# vramtop's own, built after the first frame (vramtop/machines/deferred_backend.py): the
# sampler and its diagnosis (the findings, the headroom model, what a reading is made into),
# the supervisor, the simulator, and the screens a key opens.
OWN_LATER = (
    "vramtop.machines.machine_backend",
    "vramtop.supervisor",
    "vramtop.sim.machine",
    "vramtop.core.diagnosis.diagnoser",
    "vramtop.core.findings",
    "vramtop.core.headroom",
    "vramtop.core.sample_facts",
    "vramtop.core.budget",
    "vramtop.core.windows",
    "vramtop.tui.screens.timeline_screen",
    "vramtop.tui.screens.budget_dialog",
    "vramtop.tui.screens.headroom_screen",
    "vramtop.tui.screens.quit_dialog",
    "vramtop.tui.whatif",
)


@pytest.mark.parametrize("argv", [["--url", "http://127.0.0.1:9"], ["--demo"]])
def test_the_console_draws_before_it_loads_the_heavy_parts(tmp_path: Path, argv: list[str]) -> None:
    """Everything `vramtop --url` and `vramtop --demo` do up to the console's first frame:
    the options, the settings, the profiles (none here), the backend, the app's modules and
    themes (the app itself is not run: the console replaced by one that reports)."""
    code = (
        "import sys\n"
        "from vramtop import cli\n"
        "from vramtop.tui import app, themes\n"
        "def console(backend, settings):\n"
        "    themes.load_themes()\n"
        "    assert backend.demo == ('--demo' in sys.argv) and not backend.is_built\n"
        "    print(','.join(sorted(n for n in sys.modules if n.split('.')[0] in "
        f"{NOT_BEFORE_THE_FIRST_FRAME!r} or n in {OWN_LATER!r})))\n"
        "    return 0\n"
        "app.run_console = console\n"
        "sys.exit(cli.main(sys.argv[1:]))\n"
    )
    env = {**os.environ, "VRAMTOP_HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"imported before the first frame: {out.stdout.strip()}"


def test_reading_a_real_metrics_page_needs_no_prometheus_client() -> None:
    """`--once` reads /metrics twice: the library's import would cost more than both reads."""
    page = Path(__file__).parents[1] / "fixtures" / "vllm-0.32-cpu" / "metrics.txt"
    code = (
        "import sys\n"
        "from vramtop.core.vllm.metrics import parse_metrics\n"
        f"metrics = parse_metrics(open({str(page)!r}).read())\n"
        "assert metrics.generation_tokens_total and metrics.cache.num_gpu_blocks\n"
        "print('prometheus_client' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_profiles_console_draws_before_its_server_is_looked_at(tmp_path: Path) -> None:
    """`vramtop` with a default profile: the profile is read (and refused before the console
    opens when it cannot be), its supervisor and the GPU library come after the first frame."""
    env = {**os.environ, "VRAMTOP_HOME": str(tmp_path)}
    saved = (
        "from vramtop.config import profile_from_argv\n"
        "from vramtop.profiles import save_profile\n"
        "from vramtop.profiles import set_default_profile\n"
        "save_profile(profile_from_argv('mine', ['vllm', 'serve', 'm', '--port', '8123']))\n"
        "set_default_profile('mine')\n"
    )
    subprocess.run([sys.executable, "-c", saved], env=env, check=True)
    code = (
        "import sys\n"
        "from vramtop import cli\n"
        "from vramtop.tui import app\n"
        "def console(backend, settings):\n"
        "    assert not backend.is_built and backend.profile_name == 'mine' and backend.can_act\n"
        "    print(','.join(sorted(n for n in sys.modules if n.split('.')[0] in "
        f"{NOT_BEFORE_THE_FIRST_FRAME[1:]!r} or n in {OWN_LATER!r})))\n"
        "    return 0\n"
        "app.run_console = console\n"
        "sys.exit(cli.main(sys.argv[1:]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"imported before the first frame: {out.stdout.strip()}"
    # A profile that is not there: refused before any console, exit 2.
    missing = subprocess.run(
        [sys.executable, "-c", code, "--profile", "absent"], capture_output=True, text=True, env=env
    )
    assert missing.returncode == 2 and "absent" in missing.stderr
    assert missing.stdout == ""
