"""Median time to parse a real vLLM /metrics page: vramtop's parse_metrics against
prometheus_client's parser alone (the baseline it builds on).

Usage: python -m bench.bench_parse [--rounds 200] [path/to/metrics.txt]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from vramtop.core.vllm.metrics import parse_metrics  # noqa: E402

CANDIDATES = (
    ROOT / "tests" / "fixtures" / "vllm-0.32-cpu" / "metrics.txt",
    ROOT.parent / "shared" / "fixtures" / "vllm-0.32-cpu" / "metrics.txt",
)


def median_seconds(fn: object, text: str, rounds: int = 200) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn(text)  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("paths", nargs="*", type=Path, help="captured /metrics pages")
    parser.add_argument("--rounds", type=int, default=200, help="parses timed of each")
    args = parser.parse_args()
    paths = args.paths or list(CANDIDATES)
    path = next((p for p in paths if p.is_file()), None)
    if path is None:
        print("bench_parse: no captured metrics.txt found; pass its path as an argument")
        return 0
    text = path.read_text()
    baseline = median_seconds(lambda t: list(text_string_to_metric_families(t)), text, args.rounds)
    ours = median_seconds(parse_metrics, text, args.rounds)
    print(f"page: {path.name}, {len(text) / 1024:.1f} KiB")
    print(f"prometheus_client alone: {baseline * 1e3:.3f} ms median")
    print(f"parse_metrics:           {ours * 1e3:.3f} ms median")
    print(f"ratio (parse_metrics / prometheus_client): {ours / baseline:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
