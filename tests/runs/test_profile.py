"""strata_bench/runs/profile.py: bench --profile's ncu command per timed row, its output merged into the row (the
recorded ncu outputs of tests/kernels/data/ncu/), the record and table columns, and the row without ncu."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from strata_bench.cases.request import CaseRequest
from strata_bench.cases.spec import RunSpec
from strata_bench.families import load_builtin_families
from strata_bench.kernels import ncu
from strata_bench.report import bench as benchtable
from strata_bench.runs import profile
from strata_bench.timing.bench import Timing
from strata_bench.timing.ceilings import Ceilings
from strata_bench.timing.status import BenchStatus, TimingStatus

DATA = Path(__file__).resolve().parents[1] / "kernels" / "data" / "ncu"
FAMILIES = load_builtin_families()
MMVQ = FAMILIES["mmvq"]
CASE = MMVQ.case("iq1_s", 131072, 8192, 1, "seed:1")
MODEL = MMVQ.bytes_moved(CASE)
SPEC = RunSpec(request=CaseRequest(shape=(131072, 8192), cols=(1, 8)), purpose="bench")
NO_NCU = "ncu not found (Nsight Compute: put ncu on PATH or set STRATA_NCU)"


def _timing(variant: str, timed: bool = True) -> Timing:
    status = {} if timed else {"status": TimingStatus(BenchStatus.PARITY_FAILED, "x")}
    return Timing(CASE, variant, (120.0,) if timed else (), 1, 3, MODEL, 0, Ceilings(4.6e12, 4.2e12), **status)


def test_each_variant_profiles_its_own_kernel_not_an_earlier_variants_or_the_quantizer():
    # new's kernels: at 131072 rows its one-column iq1_s pass runs mmvq_onecol
    assert [profile.kernel_regex(MMVQ, CASE, v) for v in CASE.variants] == ["mmvq_old",
                                                                            "mmvq_mma|mmvq_new|mmvq_onecol"]
    pf = FAMILIES["pfgemm"]
    case = next(iter(pf.bench_cases()))
    # auto picks old's or new's kernel per case: every kernel it has is an earlier variant's
    assert [profile.kernel_regex(pf, case, v) for v in case.variants] == ["pfgemm_old", "pfgemm_new", None]


def test_the_child_is_the_bench_narrowed_to_the_rows_case_under_ncu_without_clock_control():
    rows = [(0, _timing("old")), (0, _timing("new")), (1, _timing("new", timed=False))]
    jobs = profile.plan_jobs(SPEC, FAMILIES, rows, "/tmp/r", "/opt/ncu")
    bench = [sys.executable, "-m", "strata_bench", "bench", "-q", "--budget", "0.05", "--results", "/tmp/r",
             "--family", "mmvq", "--format", "iq1_s", "-k", r"^mmvq/iq1_s/\d+x\d+/n\d+/seed:1$",
             "--shape", "131072x8192", "--cols", "1"]
    head = ["/opt/ncu", "--csv", "--print-units", "base", "--clock-control", "none", "--metrics", ",".join(ncu.METRICS)]
    assert jobs == [  # the untimed row has nothing to explain: no job
        profile.ProfileJob(0, CASE.name, "old", tuple(head + ["-k", "regex:mmvq_old", "-c", "64"] + bench),
                           regex="mmvq_old"),
        profile.ProfileJob(0, CASE.name, "new",
                           tuple(head + ["-k", "regex:mmvq_mma|mmvq_new|mmvq_onecol", "-c", "64"] + bench),
                           regex="mmvq_mma|mmvq_new|mmvq_onecol")]


def test_the_recorded_ncu_output_becomes_the_rows_profile():
    """The issue's reading of mmvq_new, iq1_s, one column (kernels/ncu.py's sample): 2.17 thread-instructions
    a weight, 66% issue, 37% DRAM, the model's bytes: `issue`."""
    row = profile.merge_output((DATA / "mmvq_iq1_s_131072x8192_n1.details.csv").read_text(), "", 0,
                               131072 * 8192, MODEL)
    assert (round(row.inst_per_weight, 2), row.issue_pct, row.dram_pct, row.bound, row.bytes_off, row.blank) == \
        (2.17, 66.27, 37.14, "issue", False, None)
    denied = profile.merge_output((DATA / "perm_denied.txt").read_text(), "", 1, 1, MODEL)
    assert denied.blank.startswith("ncu may not read the GPU's performance counters here (ERR_NVGPUCTRPERM")
    assert denied.inst_per_weight is None and denied.model_bytes == MODEL


def test_profiled_timings_carry_the_profile_into_the_record_and_the_table():
    csv = (DATA / "mmvq_iq1_s_131072x8192_n1.details.csv").read_text()
    seen = []

    def runner(cmd, **kwargs):
        seen.append(cmd)
        # the child checks the variants through the row's and times none: ncu sees one call of it
        assert kwargs["env"]["STRATA_PROFILE_CALL"] == "new"
        return subprocess.CompletedProcess(cmd, 0, csv, "")

    rows = profile.profile_timings(SPEC, FAMILIES, [(0, _timing("new")), (0, _timing("old", timed=False))],
                                   runner=runner, ncu_path="/opt/ncu")
    assert len(seen) == 1 and seen[0][seen[0].index("-k") + 1] == "regex:mmvq_mma|mmvq_new|mmvq_onecol"
    record = rows[0][1].to_record()["profile"]
    assert (round(record["inst_per_weight"], 2), record["bound"], record["bytes_off"]) == (2.17, "issue", False)
    assert rows[1][1].profile is None  # not timed: not profiled
    cells = benchtable.profile_cells(record)
    assert cells == {"inst/w": record["inst_per_weight"], "DRAM/model": f"{record['bytes_ratio']:.3f}",
                     "issue%": 66.27, "DRAM%": 37.14, "binds": "issue"}
    frame = benchtable.detail_frame([{**rows[0][1].to_record(), "device": 0}])
    assert list(frame.columns[-5:]) == list(benchtable.PROFILE_COLUMNS) and frame["binds"].tolist() == ["issue"]


def test_a_variant_whose_pass_here_is_an_earlier_variants_kernel_says_so():
    """mmvq's new runs mmvq_old's kernel for q8_0 at one column (NEW_CONFIGS): its own kernels never launch, so ncu
    profiles none (the H100's peer run, 2026-12-06); the row says why, not only that ncu matched nothing."""
    no_kernel = "==PROF== Disconnected from process 1\n==WARNING== No kernels were profiled.\n"
    job = profile.ProfileJob(0, CASE.name, "new", ("ncu",), regex="mmvq_mma|mmvq_new|mmvq_onecol")
    row = profile.run_job(job, 1, MODEL, runner=lambda cmd, **kw: subprocess.CompletedProcess(cmd, 0, no_kernel, ""))
    assert row.blank == ("none of new's own kernels (mmvq_mma|mmvq_new|mmvq_onecol) ran in this case: it runs an "
                         "earlier variant's kernel here, profiled in that variant's row")
    failed = profile.run_job(job, 1, MODEL, runner=lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, no_kernel, ""))
    assert failed.blank == ncu.NO_KERNEL  # the child failed: nothing says which kernels it would have run


def test_instructions_are_per_weight_the_call_reads():
    """grouped's call reads gate, up and down of every expert with entries: the profile divides by all of them (the
    H100's first grouped profile divided by one matrix and read 162 instructions a weight)."""
    grouped = FAMILIES["grouped"]
    case = next(c for c in grouped.bench_cases() if c.param("groups") == "8-8-8-8-8-8-8-8")
    assert grouped.weights_read(case) == 8 * 3 * 14336 * 4096
    assert MMVQ.weights_read(CASE) == 131072 * 8192
    empty = grouped.expert_case("iq4_xs", "iq4_xs", 512, 1024, (5, 0, 1), "seed:1")
    assert grouped.weights_read(empty) == 2 * 3 * 512 * 1024  # the empty expert is not read
    csv = (DATA / "mmvq_iq1_s_131072x8192_n1.details.csv").read_text()
    timing = Timing(case, "new", (550.0,), 1, 3, grouped.bytes_moved(case), 0, Ceilings(3.1e12, 3.0e12))
    rows = profile.profile_timings(SPEC, FAMILIES, [(0, timing)], ncu_path="/opt/ncu",
                                   runner=lambda cmd, **kw: subprocess.CompletedProcess(cmd, 0, csv, ""))
    one_matrix = profile.merge_output(csv, "", 0, 14336 * 4096, 1)
    assert rows[0][1].profile.inst_per_weight == pytest.approx(one_matrix.inst_per_weight / 24)


def test_bytes_off_the_model_are_flagged_in_the_table():
    record = {"inst_per_weight": 0.4, "bytes_ratio": 0.0531, "bytes_off": True, "issue_pct": 44.65,
              "dram_pct": 19.82, "bound": "latency", "blank": None}
    assert benchtable.profile_cells(record)["DRAM/model"] == "0.053 OFF"


def test_without_ncu_every_row_is_blank_and_one_line_says_why(monkeypatch):
    monkeypatch.delenv("STRATA_NCU", raising=False)
    monkeypatch.setattr(ncu.shutil, "which", lambda name: None)

    def runner(cmd, **kwargs):
        raise AssertionError("no child without ncu")

    rows = profile.profile_timings(SPEC, FAMILIES, [(0, _timing("old")), (0, _timing("new"))], runner=runner)
    records = [{**t.to_record(), "device": d} for d, t in rows]
    assert [r["profile"]["blank"] for r in records] == [NO_NCU, NO_NCU]
    assert benchtable.profile_cells(records[0]["profile"]) == dict.fromkeys(benchtable.PROFILE_COLUMNS)
    assert benchtable.footer_lines(records) [:1] == [f"profile blank (2 rows): {NO_NCU}"]


def test_a_run_without_profile_shows_no_profile_columns():
    frame = benchtable.detail_frame([{**_timing("new").to_record(), "device": 0}])
    assert not set(benchtable.PROFILE_COLUMNS) & set(frame.columns)


@pytest.mark.parametrize("expression,base", [("mmvq_mma<siq::fmt_iq2_xxs_pair, 4, 1, 1>", "mmvq_mma"),
                                             ("quantize_q8_1", "quantize_q8_1"),
                                             ("ggml::mul_mat_vec_q<(ggml_type)16, 1>", "mul_mat_vec_q")])
def test_the_kernel_base_is_what_ncus_k_matches(expression, base):
    assert profile._base(expression) == base
