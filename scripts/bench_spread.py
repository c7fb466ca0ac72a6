"""Spread of repeated bench medians: `python scripts/bench_spread.py results/.../bench-*.json ...`.

For every (case, variant) present in all files: the medians, and (max - min) / median of them. The issue's
bar is a spread <= 1% for a kernel of >= 20 us benchmarked 5 times."""
from __future__ import annotations

import sys
from collections import defaultdict

import numpy as np

from strata_bench.results.store import read_records


def main(paths: list[str]) -> int:
    medians: dict[tuple[str, str], list[float]] = defaultdict(list)
    for path in paths:
        for rec in read_records(path):
            if rec.get("status") == "timed":
                medians[(rec["case"], rec["variant"])].append(rec["median_us"])
    worst = 0.0
    for (case, variant), values in sorted(medians.items()):
        if len(values) != len(paths):
            continue
        spread = (max(values) - min(values)) / float(np.median(values))
        worst = max(worst, spread)
        print(f"{case} [{variant}]: {len(values)} runs, medians {', '.join(f'{v:.2f}' for v in values)} us, "
              f"spread {100 * spread:.2f}%")
    print(f"worst spread {100 * worst:.2f}% (bar: 1%)")
    return 0 if worst <= 0.01 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
