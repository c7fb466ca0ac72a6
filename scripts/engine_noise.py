"""Where a real engine's run-to-run spread comes from: llama-bench processes under a few conditions, interleaved.

    python scripts/engine_noise.py LLAMA_BENCH MODEL [--processes 5] [--prompts 512,1024,4096] [--out FILE.json]

Issue 36's A/A of one llama.cpp build (H100, Gemma 3 270M IQ4_XS, -r 10) was UNDECIDED on every prompt size:
one process's mean spread 3% (pp64) to 11% (pp1024) across processes, while generation spread 1.3%. A paired
A/B cannot decide below its per-process spread, so the spread's source decides what to change. Each condition
runs the same llama-bench command as a fresh process, the conditions interleaved so drift falls on all alike:
- plain: as the suite's engine A/B runs it;
- pinned: under `taskset -c 0-7` with `-t 8` (the host's scheduler moving the launching thread is one candidate);
- threads4: `-t 4` (the CPU backend's thread pool: the input embedding's rows are taken on the CPU, and 16
  spinning threads on a shared host are another candidate);
- warm: right after a GPU-busy llama-bench run (clocks and power state still up when the measured one starts).
Before each measured process the GPU's SM clock, memory clock, power, temperature and active clock-event
reasons are read (nvidia-smi, where present). From llama-bench's JSON: per test, each process's mean of its
repetitions (what the A/B compares), the spread of those means across processes (between), the mean spread of
repetitions within a process (within) and the first three repetitions over the last three (a ramp shows > 1).
Prints a markdown table; `--out` keeps every process's samples and readings as JSON.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

SMI_FIELDS = "clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"


def gpu_reading() -> dict[str, str]:
    if not shutil.which("nvidia-smi"):
        return {}
    out = subprocess.run(["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=False).stdout.strip().splitlines()
    return dict(zip(SMI_FIELDS.split(","), (v.strip() for v in out[0].split(",")))) if out else {}


def bench_objects(argv: list[str]) -> list[dict]:
    """llama-bench -o json's array (one object per test)."""
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    start = done.stdout.find("[")
    return json.loads(done.stdout[start:])


def test_name(obj: dict) -> str:
    return f"pp{obj['n_prompt']}" if obj.get("n_prompt") else f"tg{obj['n_gen']}"


# condition: (command prefix, llama-bench arguments added, a GPU-busy run first)
CONDITIONS = {"plain": ((), (), False), "pinned": (("taskset", "-c", "0-7"), ("-t", "8"), False),
              "threads4": ((), ("-t", "4"), False), "warm": ((), (), True)}


def measure(condition: str, bench: list[str], model: str) -> dict:
    prefix, extra, busy_first = CONDITIONS[condition]
    if prefix and not shutil.which(prefix[0]):
        raise RuntimeError(f"condition {condition} needs {prefix[0]}, not found")
    if busy_first:
        bench_objects([bench[0], "-m", model, "-p", "4096", "-n", "0", "-r", "5", "-ngl", "99", "-o", "json"])
    reading = gpu_reading()
    samples = {test_name(o): o["samples_ts"] for o in bench_objects([*prefix, *bench, *extra])}
    return {"condition": condition, "gpu": reading, "samples_ts": samples}


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else float("nan")


def summary_rows(runs: list[dict]) -> list[str]:
    rows = ["| condition | test | processes | mean t/s | between (cv of means) | within (mean cv) | first3 / last3 |",
            "|---|---|---|---|---|---|---|"]
    for condition in dict.fromkeys(r["condition"] for r in runs):
        mine = [r for r in runs if r["condition"] == condition]
        for test in mine[0]["samples_ts"]:
            per = [r["samples_ts"][test] for r in mine]
            means = [statistics.fmean(s) for s in per]
            ramp = statistics.fmean(statistics.fmean(s[:3]) / statistics.fmean(s[-3:]) for s in per)
            rows.append(f"| {condition} | {test} | {len(per)} | {statistics.fmean(means):.0f} | "
                        f"{100 * cv(means):.2f}% | {100 * statistics.fmean(cv(s) for s in per):.2f}% | {ramp:.3f} |")
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("llama_bench")
    parser.add_argument("model")
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--prompts", default="512,1024,4096")
    parser.add_argument("--conditions", default=",".join(CONDITIONS))
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    bench = [args.llama_bench, "-m", args.model, "-p", args.prompts, "-n", "128", "-r", "10", "-ngl", "99",
             "-o", "json"]
    runs = []
    for i in range(args.processes):
        for condition in args.conditions.split(","):
            runs.append(measure(condition, bench, args.model))
            print(f"process {i + 1}/{args.processes} {condition}: {runs[-1]['gpu']}", file=sys.stderr)
    print("\n".join(summary_rows(runs)))
    if args.out:
        Path(args.out).write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
