"""The core never imports Textual, httpx, psutil or NVML, and never reads the clock."""

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import vramtop.core
from tests.support.source_trees import tree_of

FORBIDDEN = ("textual", "httpx", "psutil", "pynvml", "rich", "subprocess", "socket")


def test_importing_the_whole_core_loads_no_io_library() -> None:
    modules = [m.name for m in pkgutil.walk_packages(vramtop.core.__path__, "vramtop.core.")]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"bad = sorted(n for n in sys.modules if n.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"core pulled in: {out.stdout.strip()}"
    assert "vramtop.core.vllm.log" in modules  # the sub-packages' modules too


def test_core_never_reads_the_clock() -> None:
    core = Path(vramtop.core.__file__).parent
    offenders = []
    for path in core.rglob("*.py"):
        tree = tree_of(path)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and (node.value.id, node.attr)
                in {("time", "time"), ("time", "monotonic"), ("datetime", "now")}
            ):
                offenders.append(f"{path.relative_to(core)}:{node.lineno}")
    assert offenders == []
