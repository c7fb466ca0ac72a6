"""Time the host phases of `strata-bench parity` over the default cases, on a host without a GPU.

    PYTHONPATH=$PWD python scripts/profile_parity_host.py [--family F] [-k REGEX] [--no-share] [--no-ahead]
        [--cprofile N] [--pool N]

The numpy stand-in of scripts/launch_trace.py replaces cupy; launches are recorded, not run, and every
variant's outputs come back as zeros with nothing unwritten (identical across variants, so no bitwise
diagnosis runs, as in a passing GPU run). Everything else is the real parity path (checks/parity.py's
check_case): make_inputs, the float64 references (and their disk cache), the related-case runs and every
comparison, parity's pool of reference workers (checks/refpool.py; --pool 0 turns it off, as parity does
when the cache is off) and its thread making the cases' inputs and cache lookups ahead of the loop
(checks/ahead.py; --no-ahead makes them in the loop). Prints seconds per phase (wall, then the loop
thread's CPU seconds: steadier on a shared host), the work beside the loop and the totals; run it twice
to see the cold and the warm cache (STRATA_CACHE_DIR picks the cache folder, STRATA_REF_CACHE=off turns
the reference cache off; STRATA_CHECK_THREADS=1 keeps the comparisons' pieces on the loop's thread, whose
CPU seconds then hold all of them).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_trace  # the numpy stand-in for cupy


def cpu_phase_times():
    """A PhaseTimes that also sums the loop thread's CPU seconds per phase (in `.cpu`): on a loaded host the
    wall seconds swing with the other load, the CPU seconds much less (the thread making cases ahead is
    not in them: the process's CPU is printed as a whole)."""
    from contextlib import contextmanager
    from dataclasses import dataclass, field

    from strata_bench.checks.phases import PHASES, PhaseTimes

    @dataclass
    class CpuPhaseTimes(PhaseTimes):
        cpu: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))

        @contextmanager
        def phase(self, name):
            start = time.thread_time()
            try:
                with super().phase(name):
                    yield
            finally:
                self.cpu[name] = self.cpu.get(name, 0.0) + time.thread_time() - start

    return CpuPhaseTimes()


def fake_run_variant(family, case, variant, kernels, dev):
    """A VariantRun whose outputs are the allocated (zeroed) arrays, every element written."""
    from strata_bench.gpu.launch import VariantRun

    outs = family.alloc_outputs(case, dev)
    family.launch(case, variant, kernels, dev, outs)
    host = {}
    for name, arr in outs.items():
        a = np.zeros(arr.shape, dtype=arr.dtype)
        host[name] = a
    return VariantRun(variant, host, {name: np.zeros(a.shape, dtype=bool) for name, a in host.items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", default=[], help="only these families")
    parser.add_argument("-k", dest="pattern", default=None, help="only cases whose name matches")
    parser.add_argument("--no-share", action="store_true", help="run related cases again for every case")
    parser.add_argument("--no-ahead", action="store_true", help="make each case's inputs in the loop, not ahead")
    parser.add_argument("--cprofile", type=int, default=0, help="also print the top N functions (cProfile)")
    parser.add_argument("--pool", type=int, default=None,
                        help="reference workers (default: as parity, one per core less one, at most 15; 0: no pool)")
    args = parser.parse_args()
    sys.modules["cupy"] = launch_trace._fake_cupy()
    sys.modules.update(launch_trace._fake_cupy_backends())
    import io
    import contextlib

    from strata_bench.cases import CaseFilter
    from strata_bench.checks import parity
    from strata_bench.checks.ahead import Ahead
    from strata_bench.checks.refpool import ReferencePool
    from strata_bench.cases.spec import RunSpec
    from strata_bench.runs.prepare import prepare

    parity.run_variant = fake_run_variant
    prepared = prepare(RunSpec(CaseFilter(families=tuple(args.family), pattern=args.pattern)))
    cases, catalog = prepared.cases, prepared.catalog
    times = cpu_phase_times()
    start, cpu_start, loop_start = time.perf_counter(), time.process_time(), time.thread_time()
    pool = ReferencePool(cases, catalog, workers=args.pool)
    ahead = Ahead(cases, catalog, pool, **({"thread": False} if args.no_ahead else {}))
    checker = parity.CaseChecker(times, share_runs=not args.no_share, ahead=ahead)
    kernels = launch_trace.FakeKernels([""])
    profiler = None
    if args.cprofile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    per_family: dict[str, float] = {}
    with contextlib.redirect_stdout(io.StringIO()):  # the stand-in prints its opt-in calls
        for case in cases:
            t0 = time.perf_counter()
            checker(catalog[case.family], case, kernels, 0)
            per_family[case.family] = per_family.get(case.family, 0.0) + time.perf_counter() - t0
    wall, cpu, loop_cpu = time.perf_counter() - start, time.process_time() - cpu_start, time.thread_time() - loop_start
    ahead.close()
    pool.close()
    if pool.seconds is not None:
        times.beside["references (pool)"] = pool.seconds
    times.beside.update({f"{part} (ahead)": sec for part, sec in ahead.seconds.items() if sec})
    print(f"pool workers: {pool.workers}", file=sys.stderr)
    if profiler is not None:
        import pstats

        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.cprofile)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(args.cprofile)
    print(f"{len(cases)} cases")
    for line in times.lines(wall):
        print(line)
    print(f"{'cpu':<12} {cpu:8.2f} s (this process, all threads: steadier than wall on a busy host)")
    print(f"{'loop cpu':<12} {loop_cpu:8.2f} s (the loop's thread)")
    print("loop cpu per phase: " + ", ".join(f"{name} {sec:.2f} s" for name, sec in times.cpu.items()))
    for fam, sec in sorted(per_family.items(), key=lambda kv: -kv[1]):
        print(f"  {fam:<12} {sec:7.2f} s")


if __name__ == "__main__":
    main()
