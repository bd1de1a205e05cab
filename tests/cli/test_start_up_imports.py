"""What the console imports before its first frame: only what that frame needs.

Measured by bench/bench_first_frame.py; this checks the modules, which a later import at the
top of a module would bring back without anyone noticing (each costs tens of milliseconds of
CPU before anything is drawn)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# Loaded later, where they are used: validation of profiles, the GPU library (in the reader,
# after the first frame), YAML (for a YAML theme), the supervisor's HTTP client and process
# tree, and the exporter's Prometheus client.
NOT_BEFORE_THE_FIRST_FRAME = ("pydantic", "pynvml", "yaml", "httpx", "psutil", "prometheus_client")


def test_watching_a_url_opens_without_the_heavy_libraries(tmp_path: Path) -> None:
    """Everything `vramtop --url` does up to the console's first frame: the options, the
    settings, the profiles (none here), the backend and the app's modules and themes."""
    code = (
        "import sys\n"
        "from vramtop import cli\n"
        "from vramtop.commands import common\n"
        "from vramtop.settings import load_settings\n"
        "from vramtop.tui import app, themes\n"
        "args = cli.parse_args(['--url', 'http://127.0.0.1:9'])\n"
        "load_settings()\n"
        "backend, _ = common.backend_for(args)\n"
        "themes.load_themes()\n"
        f"print(','.join(sorted(n for n in sys.modules if n.split('.')[0] in "
        f"{NOT_BEFORE_THE_FIRST_FRAME!r})))\n"
    )
    env = {**os.environ, "VRAMTOP_HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "", f"imported before the first frame: {out.stdout.strip()}"


def test_reading_a_real_metrics_page_needs_no_prometheus_client() -> None:
    """`--once` reads /metrics twice: the library's import would cost more than both reads."""
    page = Path(__file__).parents[1] / "fixtures" / "vllm-0.32-cpu" / "metrics.txt"
    code = (
        "import sys\n"
        "from vramtop.core.metrics import parse_metrics\n"
        f"metrics = parse_metrics(open({str(page)!r}).read())\n"
        "assert metrics.generation_tokens_total and metrics.cache.num_gpu_blocks\n"
        "print('prometheus_client' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
