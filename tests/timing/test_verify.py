"""Timed outputs checked, without a GPU: the numpy stand-in for cupy whose graph replays run the captured
launches (tests/conftest.py, `graph_standin`), a variant that does its work only on its first launches
(its later launches leave the poison), and the roofline's impossible times."""
from __future__ import annotations

import json
import subprocess
from dataclasses import replace
import sys
from pathlib import Path

import numpy as np
import pytest

from strata_bench.cases import Case
from strata_bench.errors import CheckFailed
from strata_bench.timing.bench import TimingConfig, bench_case
from strata_bench.timing.ceilings import Ceilings
from strata_bench.timing.graph import InputCopies, prepare_copies
from strata_bench.timing.verify import (ROOFLINE_SLACK, above_ceiling, poison_outputs, roofline_problem,
                                        sensitivity_text, timed_output_problem)

CEILINGS = Ceilings(read_bps=4e12, copy_bps=5e12)
CASE = Case("toy", "f32", rows=1, cols=4, variants=("old", "lazy"))
CFG = TimingConfig(min_trials=10, graph_target_s=60e-6)
LAZY_DIFFERS = ("timed output differs: lazy copy 0 of 3: y: 4 of 4 elements differ; first at index 0: "
                "checked=np.float32(0.0) (0x00000000) timed=np.float32(nan) (0xffffffff), 2147483647 ulp; "
                "worst at index 0: checked=np.float32(0.0) (0x00000000) timed=np.float32(nan) (0xffffffff), "
                "2147483647 ulp")


def _roofline(*args) -> str:
    """roofline_problem's status as the record writes it ("" for none)."""
    return str(roofline_problem(*args) or "")


def _timed_output(*args, **kwargs) -> str:
    return str(timed_output_problem(*args, **kwargs) or "")


def test_poison_fills_every_output_of_every_copy_with_ff_bytes(graph_standin):
    prep = InputCopies([{}, {}], [{"y": np.zeros(2, np.float32), "i": np.zeros(3, np.int8)},
                                  {"y": np.ones(2, np.float32), "i": np.ones(3, np.int8)}], 8)
    poison_outputs(prep)
    assert [o["y"].tobytes() + o["i"].tobytes() for o in prep.outs] == [b"\xff" * 11] * 2


def test_a_variant_that_works_only_on_its_first_launches_is_caught_by_bench(graph_standin):
    timings = bench_case(graph_standin.LazyFamily(honest=2), CASE, None, 0, CFG, CEILINGS)
    assert [(t.variant, str(t.status)) for t in timings] == [("old", "timed"), ("lazy", LAZY_DIFFERS)]
    assert timings[1].samples_us  # timed, but the status says its figures are not results


def test_an_honest_variant_passes_and_a_lazy_one_with_enough_honest_launches_does_too(graph_standin):
    # 10**6 honest launches cover the check, the probe, the warm-up and every trial: nothing skipped.
    timings = bench_case(graph_standin.LazyFamily(honest=10**6), CASE, None, 0, CFG, CEILINGS)
    assert [str(t.status) for t in timings] == ["timed", "timed"]


def test_a_copy_the_timed_graph_did_not_launch_is_not_checked(graph_standin):
    prep = InputCopies([{}, {}], [{"y": np.full(1, 2, np.float32)}, {"y": np.full(1, np.nan, np.float32)}], 4)
    checked = {"y": np.full(1, 2, np.float32)}
    assert _timed_output(graph_standin.LazyFamily(), CASE, "old", prep, checked, copies=1) == ""
    assert _timed_output(graph_standin.LazyFamily(), CASE, "old", prep, checked).startswith(
        "timed output differs: old copy 1 of 2: y: 1 of 1 elements differ; first at index 0:")


def test_every_output_is_checked_against_the_variants_own_check_result(graph_standin):
    # A family that compares no outputs between variants (pfgemm's tensor-core sums) is still checked:
    # each variant against its own output in the check step.
    class Uncompared(graph_standin.LazyFamily):
        def compared_outputs(self, case): return ()

    timings = bench_case(Uncompared(honest=2), CASE, None, 0, CFG, CEILINGS)
    assert [(t.variant, str(t.status)) for t in timings] == [("old", "timed"), ("lazy", LAZY_DIFFERS)]
    prep = InputCopies([{}], [{"y": np.full(1, 2, np.float32), "tmp": np.full(1, 9, np.float32)}], 4)
    checked = {"y": np.full(1, 2, np.float32), "tmp": np.full(1, 0, np.float32)}
    assert _timed_output(Uncompared(), CASE, "old", prep, checked).startswith(
        "timed output differs: old copy 0 of 1: tmp: 1 of 1 elements differ; first at index 0:")


def test_roofline_problem_flags_a_time_below_bytes_over_the_read_ceiling():
    # 4 MB at 4 TB/s takes at least 1 us; 3% slack is allowed (the noise of the median and the ceiling).
    assert ROOFLINE_SLACK == 0.03
    assert _roofline("new", 1e-6, 4_000_000, CEILINGS) == ""
    assert _roofline("new", 0.98e-6, 4_000_000, CEILINGS) == ""
    assert _roofline("new", 0.96e-6, 4_000_000, CEILINGS) == (
        "impossible: new at 0.960 us moves 4000000 bytes at 104% of the measured read ceiling "
        "(4.00 TB/s, least 1.000 us)")
    assert _roofline("new", 0.05e-6, 4_000_000, CEILINGS) == (
        "impossible: new at 0.050 us moves 4000000 bytes at 2000% of the measured read ceiling "
        "(4.00 TB/s, least 1.000 us)")
    assert _roofline("new", 0.05e-6, 0, CEILINGS) == ""  # a family that counts no bytes


def test_a_time_above_the_theoretical_peak_is_impossible_within_the_slack():
    # Peak 4.04 TB/s just above the read ceiling: 0.98 us for 4 MB is 4.08 TB/s, within the 3% slack
    # but faster than the memory can deliver.
    ceilings = Ceilings(read_bps=4e12, copy_bps=5e12, peak_bps=4.04e12)
    assert _roofline("new", 0.995e-6, 4_000_000, ceilings) == ""
    assert _roofline("new", 0.98e-6, 4_000_000, ceilings) == (
        "impossible: new at 0.980 us moves 4000000 bytes at 102% of the measured read ceiling "
        "(4.00 TB/s, least 1.000 us, above the theoretical peak 4.04 TB/s)")
    # A peak below the measured ceiling (a misread clock) is not trusted.
    assert _roofline("new", 0.98e-6, 4_000_000, Ceilings(4e12, 5e12, peak_bps=3e12)) == ""


def test_above_ceiling_judges_only_the_ceiling_that_bounds_the_kernel_and_says_when_re_measured():
    assert above_ceiling(4_000_000, 1.01e-6, CEILINGS) == ""
    assert above_ceiling(4_000_000, 0.99e-6, CEILINGS) == "above the measured read ceiling"
    assert above_ceiling(4_000_000, 0.7e-6, Ceilings(4e12, 5e12, source="re-measured")) == (
        "above the measured read ceiling (re-measured)")
    # q8_0 mmvq at 131072x8192 beat the copy ceiling in every run: copy does not bound a mat-vec
    assert above_ceiling(4_000_000, 0.99e-6, Ceilings(4e12, 3e12), bound="read") == "above the measured read ceiling"
    assert above_ceiling(4_000_000, 1.1e-6, Ceilings(4e12, 3e12), bound="read") == ""
    assert above_ceiling(4_000_000, 1.1e-6, Ceilings(4e12, 3e12), bound="copy") == "above the measured copy ceiling"
    assert above_ceiling(4_000_000, 1e-9, CEILINGS, bound=None) == ""
    assert above_ceiling(0, 1e-9, CEILINGS) == ""


def test_sensitivity_text_states_the_smallest_change_and_the_counts():
    assert sensitivity_text(0.0042, [40, 38]) == "could see >= 0.4% (40 + 38 trials)"
    assert sensitivity_text(float("nan"), [3]) == "sensitivity unknown (3 trials, too few for a CI)"


def test_bench_marks_a_time_beyond_the_roofline_impossible(graph_standin):
    # 1 us per launch for 40 MB: 10 us is the least at 4 TB/s.
    family = graph_standin.LazyFamily(honest=10**6, bytes_per_call=40_000_000)
    timings = bench_case(family, CASE, None, 0, CFG, CEILINGS)
    assert [str(t.status) for t in timings] == [
        f"impossible: {v} at 1.000 us moves 40000000 bytes at 1000% of the measured read ceiling "
        f"(4.00 TB/s, least 10.000 us)" for v in ("old", "lazy")]


def test_the_roofline_holds_only_cold_timings(graph_standin):
    # --hot (one copy), or copies that do not cover 3x the L2: the L2 may serve the reads, no roofline.
    family = graph_standin.LazyFamily(honest=10**6, bytes_per_call=40_000_000)
    hot = bench_case(family, CASE, None, 0, replace(CFG, hot=True), CEILINGS)
    assert [(str(t.status), t.copies) for t in hot] == [("timed", 1), ("timed", 1)]
    prep = prepare_copies(family, CASE, family.make_inputs(CASE), hot=False, l2_bytes=1000)
    assert (len(prep.devs), prep.input_bytes, prep.cold) == (3, 1016, True)
    capped = prepare_copies(family, CASE, family.make_inputs(CASE), hot=False, l2_bytes=10**6)
    assert (len(capped.devs), capped.cold) == (64, False)  # 64 x 1016 bytes < 3 x 10^6


def test_the_bench_command_exits_1_for_a_rejected_variant(graph_standin):
    from strata_bench.cli.bench import _raise_for_rejected

    timings = bench_case(graph_standin.LazyFamily(honest=2), CASE, None, 0, CFG, CEILINGS)
    with pytest.raises(CheckFailed) as err:
        _raise_for_rejected(timings)
    assert str(err.value) == f"1 timed variant(s) rejected; first: {CASE.name}: {LAZY_DIFFERS}"
    assert err.value.exit_code == 1
    _raise_for_rejected(timings[:1])  # an honest variant alone: no error


# ---------------------------------------------------------------------------------------------------
# The project's own variant that works only on its first launches (tests/data/lazy_family), on the GPU

LAZY = Path(__file__).parent.parent / "data" / "lazy_family"
LAZY_ARGS = ["--kernels", str(LAZY), "--cases", str(LAZY / "cases.py"), "--family", "lazy_demo", "-q"]


def _strata(*args):
    return subprocess.run([sys.executable, "-m", "strata_bench", *args], capture_output=True, text=True,
                          timeout=600)


@pytest.mark.nvrtc
def test_the_lazy_family_compiles(cubin_cache):
    from strata_bench.kernels.build import compile_source

    comp = compile_source("lazy.cu", ["double_all", "double_lazy"], "sm_90", root=LAZY)
    assert comp is not None


@pytest.mark.gpu
def test_bench_rejects_the_lazy_variant_with_exit_1(tmp_path):
    proc = _strata("bench", *LAZY_ARGS, "--budget", "0.2", "--results", str(tmp_path))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "Traceback" not in out
    assert "timed output differs: lazy copy 0 of" in out and "y: 1048576 of 1048576 elements differ" in out
    (records_file,) = tmp_path.rglob("bench-*.jsonl")
    records = [json.loads(line) for line in records_file.read_text().splitlines()]
    status = {r["variant"]: r["status"] for r in records if "variant" in r}
    assert status["honest"] == "timed"
    assert status["lazy"].startswith("timed output differs: lazy copy 0 of ")
