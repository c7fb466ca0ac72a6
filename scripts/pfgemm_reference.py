#!/usr/bin/env python3
"""The prompt-expert GEMM's tensor-core reference on the GPU suite (issue 14): for every pfgemm bench
case, cuBLAS GemmEx (and torch.matmul where importable) on the case's fp16-dequantized weights, and,
given a bench file of the same cases, each kernel variant's share of that rate (dequantization included).

    python3 scripts/pfgemm_reference.py                                  # the references alone
    python3 scripts/pfgemm_reference.py results/nvidia-h200/bench-X.json # with the kernels' shares

Writes results/<device>/pfgemm-reference-<stamp>.json(l) (one record per case and reference) and a
CSV beside it; prints the table as markdown. Exit 2 on a missing bench file, 77 without a GPU.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bench", nargs="?", help="a bench results file holding the pfgemm bench cases")
    parser.add_argument("--results", default="results", help="results root (default: results)")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds of trials per reference")
    parser.add_argument("--no-torch", action="store_true", help="skip the torch.matmul row")
    args = parser.parse_args(argv)

    from strata_bench.families import load_builtin_families
    from strata_bench.timing import reference_gemm as ref
    from strata_bench.errors import InputError
    from strata_bench.timing.bench import TimingConfig

    records = []
    if args.bench:
        try:
            from strata_bench.results.load import load

            records = load(args.bench).records
        except InputError as exc:
            print(f"pfgemm_reference: {exc}", file=sys.stderr)
            return 2
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception as exc:  # noqa: BLE001 - no CuPy, no driver, no device: each is a skip
        print(f"pfgemm_reference: no usable GPU ({exc})", file=sys.stderr)
        return 77
    from strata_bench.results import provenance
    from strata_bench.results.paths import device_directory
    from strata_bench.results.store import ResultsWriter

    family = load_builtin_families()["pfgemm"]
    cfg = TimingConfig(budget_s=args.budget)
    writer = ResultsWriter(device_directory(args.results, name), "pfgemm-reference",
                           provenance.collect([0], families={"pfgemm": family}))
    rows = []
    for case in family.bench_cases():
        t0 = time.perf_counter()
        inputs = ref.case_inputs(family, case)
        prep_s = time.perf_counter() - t0
        timings = [ref.cublas_reference(family, case, cfg, inputs)[0]]
        if not args.no_torch:
            extra = ref.torch_reference(family, case, cfg, inputs)
            timings += [extra] if extra is not None else []
        for timing in timings:
            rec = {**timing.to_record(), **ref.kernel_shares(timing, records), "prep_s": prep_s}
            writer.append(rec)
            rows.append({k: v for k, v in rec.items() if k not in ("samples_us", "note")})
    path = writer.finish({"cases": len(rows), "bench": args.bench}, 0)
    table = pd.DataFrame(rows)
    table.to_csv(path.with_suffix(".csv"), index=False)
    print(table.to_markdown(index=False, floatfmt=".3g"))
    print(f"results: {path} and {path.with_suffix('.csv')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
