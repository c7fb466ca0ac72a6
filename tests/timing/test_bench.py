"""Bench without a GPU: the column sweep's exact case list, the record a timing writes, the order of the
named steps (with a stand-in for cupy), and the bench command's case count on a host without a GPU."""
from __future__ import annotations

import math
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from strata_bench.cases import Case, Family
from strata_bench.cli.main import cli
from strata_bench.gpu.devices import probe
from strata_bench.timing import bench, graph
from strata_bench.timing.bench import Timing, TimingConfig, bench_case
from strata_bench.timing.status import BenchStatus, TimingStatus
from strata_bench.timing.ceilings import Ceilings

# The mmvq bench cases' formats, in the order the family declares them.


@pytest.mark.skipif(probe().usable, reason="host has a GPU")
def test_bench_without_a_gpu_counts_the_swept_cases_and_exits_77():
    result = CliRunner().invoke(cli, ["bench", "--family", "mmvq", "--shape", "131072x8192", "--cols", "1,8"])
    assert result.exit_code == 77
    assert "22 cases selected, none timed" in result.output


CEILINGS = Ceilings(read_bps=4e12, copy_bps=5e12)
CASE = Case("mmvq", "q8_0", rows=1024, cols=4096, ncols=8)


def test_timing_record_of_a_timed_variant():
    timing = Timing(CASE, "new", (4.0, 2.0, 3.0), 200, 12, bytes_moved=8_000_000, flops=64_000_000,
                    ceilings=CEILINGS, ci_rel=0.005)
    assert timing.to_record() == {
        "case": "mmvq/q8_0/1024x4096/n8/seed:1", "family": "mmvq", "format": "q8_0", "rows": 1024, "cols": 4096,
        "ncols": 8, "data": "seed:1", "params": {}, "variant": "new", "status": "timed", "reason": "", "median_us": 3.0,
        "min_us": 2.0, "max_us": 4.0, "ci_rel": 0.005, "trials": 3, "launches_per_sample": 200, "copies": 12,
        "bytes": 8_000_000, "gbps": 8_000_000 / 3e-6 / 1e9, "frac_read": 8_000_000 / 3e-6 / 4e12,
        "frac_copy": 8_000_000 / 3e-6 / 5e12, "bound": "read", "frac_bound": 8_000_000 / 3e-6 / 4e12,
        "tflops": 64_000_000 / 3e-6 / 1e12,
        "ceilings": {"read_bps": 4e12, "write_bps": None, "copy_bps": 5e12, "peak_bps": None, "source": ""},
        "clocks": None, "rotation": None, "l2_reset": "", "cold_check": None, "sensitivity": None,
        "flags": [],
        "samples_us": [4.0, 2.0, 3.0], "profile": None}


def test_timing_record_of_a_variant_that_was_not_timed():
    record = Timing(CASE, "old", (), 0, 12, 8_000_000, 0, CEILINGS, status=TimingStatus(BenchStatus.PARITY_FAILED, "x")).to_record()
    assert record["status"] == "parity failed: x" and record["trials"] == 0 and record["samples_us"] == []
    assert all(math.isnan(record[k]) for k in ("median_us", "min_us", "max_us", "ci_rel", "gbps"))
    assert record["frac_read"] is record["frac_copy"] is record["tflops"] is None


def test_timing_config_is_what_the_provenance_records():
    assert vars(TimingConfig()) == {"hot": False, "rel_ci": 0.01, "budget_s": 2.0, "min_trials": 10,
                                    "max_trials": 400, "graph_target_s": 2e-3, "check_through": ""}


# ---------------------------------------------------------------------------------------------------
# The named steps, on host arrays: check -> (size, capture, warm-up, trials) per variant -> summary

class _Stream:
    """cupy.cuda.Stream's part that bench uses; a capture returns the launches it saw (callables that do
    the launch's work) as the 'graph'."""

    def __init__(self, non_blocking=False):
        self.captured = None

    def __enter__(self): return self
    def __exit__(self, *exc): return False
    def begin_capture(self): self.captured = []
    def end_capture(self): return self.captured


class _Pair(Family):
    # name left empty so it does not register in the global registry
    def __init__(self, new_value=1.0):
        self.new_value, self.log = new_value, []

    def default_cases(self): return []
    def name_expressions(self, source): return []
    def make_inputs(self, case): return {"w": np.zeros(1000, np.uint8)}
    def to_device(self, case, host): return {"w": np.array(host["w"])}
    def alloc_outputs(self, case, dev): return {"y": np.zeros(4, np.float32)}
    def reference(self, case, host): return []
    def bytes_moved(self, case): return 1000

    def launch(self, case, variant, kernels, dev, outs, stream=None):
        def work():
            outs["y"][:] = 1.0 if variant == "old" else self.new_value

        if stream is None:  # eager: the check step
            work()
            self.log.append(("check", variant))
        else:
            stream.captured.append(work)


@pytest.fixture
def fake_gpu(monkeypatch):
    """cupy replaced by host stand-ins; a replay runs the captured launches and takes 1 us per launch;
    the steps are logged."""
    log = []

    def replay(graph_, stream):
        log.append(("replay", len(graph_)))
        for launch in graph_:
            launch()
        return len(graph_) * 1e-6

    runtime = SimpleNamespace(getDeviceProperties=lambda device: {"l2CacheSize": 1000}, deviceSynchronize=lambda: None)
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(uint8=np.uint8, array_equal=np.array_equal,
                                                             cuda=SimpleNamespace(Stream=_Stream, runtime=runtime)))
    monkeypatch.setattr(graph, "replay_seconds", replay)
    monkeypatch.setattr(bench, "replay_seconds", replay)
    return log


def test_bench_case_checks_then_sizes_captures_warms_up_and_trials_each_variant(fake_gpu):
    family = _Pair()
    cfg = TimingConfig(min_trials=10, graph_target_s=60e-6)
    timings = bench_case(family, CASE, None, 0, cfg, CEILINGS)
    assert family.log == [("check", "old"), ("check", "new")]
    # Per variant: a probe of one launch per copy (3 copies of 1000 bytes cover 3 x 1000 bytes of L2),
    # then a graph of 60 us / 1 us = 60 launches, 3 warm-up replays, and 10 trials (equal samples: tight).
    per_variant = [("replay", 3)] + [("replay", 60)] * 3 + [("replay", 60)] * 10
    # Then the cold check: each of the 3 copies replayed alone twice in a row, 8 rounds (24 pairs).
    assert fake_gpu == per_variant * 2 + [("replay", 1)] * 48
    assert timings[0].cold_check is timings[1].cold_check and timings[0].cold_check.pairs == 24
    assert [(t.variant, str(t.status), t.launches_per_sample, t.copies, t.samples_us) for t in timings] == [
        (v, "timed", 60, 3, (1.0,) * 10) for v in ("old", "new")]
    assert timings[0].ci_rel == 0.0 and timings[0].bytes_moved == 1000


def test_bench_case_does_not_time_variants_that_disagree(fake_gpu):
    timings = bench_case(_Pair(new_value=2.0), CASE, None, 0, TimingConfig(), CEILINGS)
    assert fake_gpu == []
    assert [(t.variant, str(t.status), t.samples_us, t.copies) for t in timings] == [
        (v, "parity failed: new differs from old in y", (), 3) for v in ("old", "new")]


@pytest.mark.gpu
def test_bench_of_mmvq_on_the_device_has_no_unflagged_fraction_over_100_and_records_clocks(tmp_path):
    # The default q8_0 mmvq bench cases (once 101% read / 107% copy): each record names its ceilings, its
    # clocks and rotation; a read fraction over 1 carries a flag, the copy fraction never does.
    import subprocess

    out = subprocess.run([sys.executable, "-m", "strata_bench", "bench", "--family", "mmvq", "--format", "q8_0",
                          "--results", str(tmp_path), "-q", "-o", "json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    records = __import__("json").loads(out.stdout)
    assert records
    for r in records:
        assert r["ceilings"]["read_bps"] > 0 and r["rotation"]["l2_multiple"] >= 3, r["case"]
        assert r["clocks"] is not None and "sensitivity" in r
        # Only the ceiling that bounds a mat-vec (read) is judged: q8_0 beats the copy ceiling in every run,
        # which counts the written bytes it barely has, and that must not flag it.
        assert r["bound"] == "read" and r["frac_bound"] == r["frac_read"], r["case"]
        flagged = [f for f in r["flags"] if f.startswith("above the measured")]
        assert flagged == (["above the measured read ceiling" + (" (re-measured)" if r["ceilings"]["source"] ==
                                                                 "re-measured" else "")]
                           if r["frac_read"] > 1 else []), r
    print("\n" + "\n".join(f"{r['case']} {r['variant']}: {100 * r['frac_read']:.1f}% read, "
                           f"{100 * r['frac_copy']:.1f}% copy, clocks {r['clocks']['sm_mhz']}, "
                           f"flags {r['flags']}, sees {r['sensitivity']}" for r in records))


def test_the_cold_check_replays_the_fastest_timed_variant():
    """fp16deq iq4_xs 8192x8192 on the H200: old (751 us, 5% of copy) is as fast from the L2 as from DRAM,
    so a check of old read warm while new (43 us, 92% of copy) is the one the rotation matters to."""
    from strata_bench.timing.bench import fastest

    old = Timing(CASE, "old", (751.0, 750.0), 1, 1, 1, 0, CEILINGS)
    new = Timing(CASE, "new", (43.0, 44.0), 1, 1, 1, 0, CEILINGS)
    rejected = Timing(CASE, "lazy", (), 1, 1, 1, 0, CEILINGS, status=TimingStatus(BenchStatus.PARITY_FAILED, "x"))
    assert fastest([old, new, rejected]) == "new"
    assert fastest([rejected]) == "lazy"  # nothing timed: the check does not run, any name will do
