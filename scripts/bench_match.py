"""Do a new bench run's medians match a committed one? `python scripts/bench_match.py OLD NEW [--tolerance PCT]`.

For every (case, variant) timed in both files: old and new median us and their difference. Exit 1 when any
differs by more than the tolerance (default 2%, the bar for "the speed must stay"), or when the files share
no case."""
from __future__ import annotations

import argparse
import sys

from strata_bench.results.store import read_records


def medians(path: str) -> dict[tuple[str, str], float]:
    return {(r["case"], r["variant"]): r["median_us"] for r in read_records(path) if r.get("status") == "timed"}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--tolerance", type=float, default=2.0, help="largest allowed |new/old - 1| in percent")
    args = parser.parse_args(argv)
    old, new = medians(args.old), medians(args.new)
    shared = sorted(set(old) & set(new))
    worst = 0.0
    for key in shared:
        change = new[key] / old[key] - 1
        worst = max(worst, abs(change))
        print(f"{key[0]} [{key[1]}]: {old[key]:.2f} -> {new[key]:.2f} us ({100 * change:+.2f}%)")
    print(f"{len(shared)} (case, variant) pairs in both; largest change {100 * worst:.2f}% "
          f"(tolerance {args.tolerance}%)")
    return 0 if shared and worst <= args.tolerance / 100 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
