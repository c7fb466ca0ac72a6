#!/usr/bin/env python3
"""Measurement quality of command A/B: an A/A run and a planted slowdown, through the real CLI.

1. A/A: the same `sleep S` on both arms, N pairs. Expected (issue 5): median of the per-pair
   ratios B/A within 0.5% of 1, the ratio's 95% CI covering 1, verdict SAME.
2. Planted: `sleep S` against `sleep S*1.03`. Expected: verdict SLOWER with the CI excluding 1.
   (The measured slowdown is a little under 3%: process start-up is the same on both arms.)

Each comparison runs `strata-bench ab -o json`, so its records and summary land under
--results like any A/B. Prints what it saw and one line per criterion; exits 1 if one is not met.

    python scripts/ab_quality_commands.py --pairs 20 --sleep 0.2 --results results
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys


def sleep_command(seconds: float) -> str:
    """coreutils sleep when present (about 1 ms of start-up), else a Python one-liner."""
    if shutil.which("sleep"):
        return f"sleep {seconds:.6f}"
    return f"{sys.executable} -c 'import time; time.sleep({seconds!r})'"


def run_ab(a: str, b: str, pairs: int, results: str) -> dict:
    """One `strata-bench ab` run; returns its case summary (verdict, comparison, failures)."""
    argv = [sys.executable, "-m", "strata_bench", "ab", "--pairs", str(pairs), "--warmup", "1", "--quiet",
            "--results", results, "-o", "json", "--a", a, "--b", b]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"strata-bench ab failed ({proc.returncode}): {proc.stderr.strip()}")
    print(f"  {proc.stderr.strip()}")
    return json.loads(proc.stdout)["cases"][0]


def describe(name: str, case: dict) -> dict:
    """Print the result as a reviewer would read it; return the paired statistics."""
    p = case["comparison"]["paired"]
    ci, rel, t = p["ratio_ci"], p["rel_ci"], p["ci_t"]
    print(f"{name}: {case['verdict']}")
    print(f"  B-A {p['mean_diff'] * 1e3:+.2f} ms, 95% t CI [{t['low'] * 1e3:+.2f}, {t['high'] * 1e3:+.2f}] ms "
          f"= [{rel['low'] * 100:+.2f}%, {rel['high'] * 100:+.2f}%]")
    print(f"  ratio of means {p['ratio']:.4f} [{ci['low']:.4f}, {ci['high']:.4f}] (bootstrap), "
          f"median pair ratio {p['median_ratio']:.4f}, Wilcoxon p={p['wilcoxon_p']:.3g}")
    print(f"  dominance {case['comparison']['dominance']}; drift: {case['comparison']['drift']['note']}; "
          f"failed runs {len(case['failures'])}")
    print(f"  reason: {case['reason']}")
    return p


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--sleep", type=float, default=0.2, help="seconds slept by arm A")
    parser.add_argument("--slowdown", type=float, default=0.03, help="planted relative slowdown of arm B")
    parser.add_argument("--results", default="results")
    args = parser.parse_args()
    base = sleep_command(args.sleep)
    slow = sleep_command(args.sleep * (1 + args.slowdown))

    aa_case = run_ab(base, base, args.pairs, args.results)
    aa = describe(f"A/A ({base}, {args.pairs} pairs)", aa_case)
    planted_case = run_ab(base, slow, args.pairs, args.results)
    planted = describe(f"planted +{args.slowdown:.0%} ({slow} vs {base})", planted_case)

    checks = [
        ("A/A median pair ratio within 0.5% of 1", abs(aa["median_ratio"] - 1) <= 0.005, f"{aa['median_ratio']:.4f}"),
        ("A/A ratio CI covers 1", aa["ratio_ci"]["low"] <= 1 <= aa["ratio_ci"]["high"],
         f"[{aa['ratio_ci']['low']:.4f}, {aa['ratio_ci']['high']:.4f}]"),
        ("A/A verdict SAME", aa_case["verdict"] == "SAME", aa_case["verdict"]),
        ("planted verdict SLOWER", planted_case["verdict"] == "SLOWER", planted_case["verdict"]),
        ("planted ratio CI excludes 1", planted["ratio_ci"]["low"] > 1,
         f"[{planted['ratio_ci']['low']:.4f}, {planted['ratio_ci']['high']:.4f}]"),
    ]
    for what, ok, value in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {what}: {value}")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
