"""A box's page for the fleet's tests: `{collapse}` (the collapse finding's value) and
`{sampled_at}` (the sample's Unix time) are filled in by each test; a fake exporter that
serves it over HTTP in the test's own process; and `vramtop fleet --once --json`'s rows."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vramtop import cli

# A box's page as `vramtop export --demo --card r9700` serves it (trimmed).
PAGE = """\
# HELP vramtop_build_info vramtop's version (always 1).
# TYPE vramtop_build_info gauge
vramtop_build_info{version="0.1.0"} 1.0
vramtop_gpu_info{gpu="0",memory_kind="dedicated",name="AMD Radeon AI PRO R9700"} 1.0
vramtop_gpu_memory_total_bytes{gpu="0"} 3.4208743424e+10
vramtop_gpu_gtt_total_bytes{gpu="0"} 6.6571993088e+10
vramtop_gpu_memory_used_bytes{gpu="0"} 3.2212254720e+10
vramtop_server_memory_bytes{gpu="0",method="per_process"} 2.9527900160e+10
vramtop_desktop_memory_bytes{gpu="0",method="per_process"} 2.684354560e+09
vramtop_kv_pool_bytes 1.6106127360e+10
vramtop_kv_pool_tokens 163840.0
vramtop_generation_tokens_per_second 76.0
vramtop_server_restarts_total 2.0
vramtop_budget_bytes{gpu="0"} 3.0787869082e+10
vramtop_desktop_headroom_bytes{gpu="0"} 2.88400343e+09
vramtop_budget_ratio 0.9
vramtop_kv_cache_usage_ratio 0.25
vramtop_request_decode_tokens_per_second{measure="inter_token_latency"} 38.0
vramtop_request_decode_normal_tokens_per_second{measure="inter_token_latency"} 41.0
vramtop_finding_open{kind="vram_contention"} {collapse}
vramtop_finding_open{kind="kv_pressure"} 1.0
vramtop_finding_open{kind="gpu_throttling"} 0.0
vramtop_server_up 1.0
vramtop_server_state{state="starting"} 0.0
vramtop_server_state{state="running"} 1.0
vramtop_server_state{state="stopped"} 0.0
vramtop_samples_total 12.0
vramtop_last_sample_timestamp_seconds {sampled_at}
vramtop_server_info{model="qwen3.8-27b-nvfp4",profile="demo-r9700",vllm_version="0.29.0"} 1.0
vramtop_door_in_flight 2.0
vramtop_door_held 3.0
"""


class FakeExporter:
    """Serves a vramtop page whose sample is always fresh and whose count goes up by one
    per answer; `collapse` opens the collapse finding on it."""

    def __init__(self, sampled_at: float | None = None) -> None:
        self.collapse = False
        self.sampled_at = sampled_at  # None: the time of each answer
        self.samples = 0
        self.extra = ""  # more of the page (series the test adds)
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.samples += 1
                text = PAGE.replace("{collapse}", "1.0" if owner.collapse else "0.0")
                at = owner.sampled_at if owner.sampled_at is not None else time.time()
                text = text.replace("{sampled_at}", repr(at))
                text = text.replace(
                    "vramtop_samples_total 12.0", f"vramtop_samples_total {owner.samples}"
                )
                body = (text + owner.extra).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/metrics"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def once_json(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, object]]:
    """`vramtop fleet --once --json ARGS`'s rows (it exits 0)."""
    capsys.readouterr()
    assert cli.main(["fleet", "--once", "--json", *args]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert isinstance(rows, list)
    return rows
