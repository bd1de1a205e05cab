"""Fake executables for the senders (each saves its argv, stdin and environment) and a
finding to tell of."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

from vramtop.core.findings import Finding

SAVING = """#!{python}
import json, os, sys
data = sys.stdin.buffer.read() if not sys.stdin.isatty() else b""
path = os.path.join({out!r}, "call-%d.json" % len(os.listdir({out!r})))
with open(path, "w") as f:
    json.dump({{"argv": sys.argv, "stdin": data.decode("latin-1"),
               "env": {{k: v for k, v in os.environ.items() if k.startswith("VRAMTOP_")}}}}, f)
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
"""


class Fakes:
    def __init__(self, tmp_path: Path) -> None:
        self.bin = tmp_path / "bin"
        self.out = tmp_path / "calls"
        self.bin.mkdir()
        self.out.mkdir()

    def install(self, name: str) -> Path:
        path = self.bin / name
        path.write_text(SAVING.format(python=sys.executable, out=str(self.out)))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return path

    def calls(self) -> list[dict[str, object]]:
        return [json.loads(p.read_text()) for p in sorted(self.out.iterdir())]


def contention(t: float = 12.0, **evidence: object) -> Finding:
    from vramtop.core.findings import Evidence

    values = {"generation_tps": 7.2, "baseline_generation_tps": 77.0, **evidence}
    return Finding(
        kind="vram_contention",
        severity="critical",
        first_seen_t=t,
        last_seen_t=t,
        closed_t=None,
        summary="Generation fell to 7.2 tok/s: the desktop is squeezing vLLM's memory.",
        evidence=Evidence(values),
    )
