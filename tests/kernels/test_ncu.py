"""strata_bench/kernels/ncu.py: the profile columns of a bench row from ncu's CSV (tests/kernels/data/ncu/: samples
in ncu's two CSV layouts, README there says how they were made), against bench's own byte model."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from strata_bench.errors import InputError
from strata_bench.families import load_builtin_families
from strata_bench.kernels import ncu

DATA = Path(__file__).resolve().parent / "data" / "ncu"
MMVQ = load_builtin_families()["mmvq"]


def _row(name: str, rows: int, cols: int, fmt: str) -> tuple[ncu.ProfileRow, int]:
    case = MMVQ.case(fmt, rows, cols, 1, "seed:1")
    model = MMVQ.bytes_moved(case)
    return ncu.profile_row(ncu.parse_csv((DATA / name).read_text()), rows * cols, model), model


def test_the_details_page_gives_every_launch_and_its_metrics_in_base_units():
    launches = ncu.parse_csv((DATA / "mmvq_iq1_s_131072x8192_n1.details.csv").read_text())
    assert [(l.id, l.kernel.split("(")[0]) for l in launches] == [
        (0, "quantize_q8_1"), (1, "void mmvq_new<siq::fmt_iq1_s, 1, 4, 3, 4, false>")]
    assert launches[1].metrics["smsp__inst_executed.sum"] == 72_796_160
    assert launches[1].metrics["dram__bytes_read.sum"] == 209_803_264
    assert launches[1].metrics["gpu__time_duration.sum"] == pytest.approx(121_696e-9)
    assert set(launches[0].metrics) == set(ncu.METRICS)


def test_iq1_s_at_one_column_is_issue_bound_with_the_dram_bytes_of_the_model():
    """The issue's Nsight Compute reading of mmvq_new at one column: 2.17 thread-instructions a weight, 66% of
    the issue slots, 37% of DRAM throughput, 209.8 MB = the model: `issue`."""
    row, model = _row("mmvq_iq1_s_131072x8192_n1.details.csv", 131072, 8192, "iq1_s")
    assert row.inst_per_weight == pytest.approx(32 * (72_796_160 + 10_752) / (131072 * 8192))
    assert round(row.inst_per_weight, 2) == 2.17
    assert row.dram_bytes == 33_536 + 9_728 + 209_803_264 + 525_056 and row.model_bytes == model
    assert abs(row.bytes_ratio - 1) < 0.01 and row.bytes_off is False
    assert (row.issue_pct, row.dram_pct, row.bound, row.blank) == (66.27, 37.14, "issue", None)  # mmvq_new's, not q8_1's
    assert row.to_record()["bound"] == "issue" and len(row.to_record()["kernels"]) == 2
    assert row.main.startswith("void mmvq_new<siq::fmt_iq1_s, 1,")


def test_the_raw_page_in_scaled_units_and_an_l2_resident_shape_flags_the_bytes_and_binds_on_latency():
    row, model = _row("mmvq_iq2_xxs_4096x14336_n1.raw.csv", 4096, 14336, "iq2_xxs")
    assert row.dram_bytes == pytest.approx((57.34 + 16.38 + 1204.74 + 18.18) * 1e3)
    assert row.inst_per_weight == pytest.approx(32 * (0.02 + 6.17) * 1e6 / (4096 * 14336))
    assert row.bytes_ratio < 0.1 and row.bytes_off is True  # the weights came from the L2
    assert (row.issue_pct, row.dram_pct, row.bound) == (44.65, 19.82, "latency")


@pytest.mark.parametrize("issue,dram,bound", [(66.3, 37.1, "issue"), (55.0, 81.0, "read"), (61.0, 61.0, "read"),
                                              (59.9, 59.9, "latency"), (None, 50.0, None)])
def test_the_bound_is_the_busier_unit_or_latency_below_60_percent(issue, dram, bound):
    assert ncu.bound_of(issue, dram) == bound


def test_a_model_off_by_more_than_5_percent_is_flagged_and_within_is_not():
    launch = ncu.Launch(0, "k", {"smsp__inst_executed.sum": 32.0, "dram__bytes_read.sum": 1051.0,
                                 "smsp__issue_active.avg.pct_of_peak_sustained_active": 70.0,
                                 "dram__throughput.avg.pct_of_peak_sustained_elapsed": 30.0})
    assert ncu.profile_row([launch], 32, 1000).bytes_off is True
    launch.metrics["dram__bytes_read.sum"] = 1049.0
    assert ncu.profile_row([launch], 32, 1000).bytes_off is False
    launch.metrics["dram__bytes_read.sum"] = 949.0
    assert ncu.profile_row([launch], 32, 1000).bytes_off is True


def test_rows_without_a_profile_say_why():
    assert ncu.profile_row([], 1, 1).blank == "ncu profiled no launch of this row's kernels"
    partial = ncu.Launch(0, "k", {"dram__bytes_read.sum": 5.0})
    row = ncu.profile_row([partial], 1, 5)
    assert row.bound is None and row.blank.startswith("ncu gave no instructions, issue utilisation, DRAM throughput")
    text = (DATA / "perm_denied.txt").read_text()
    assert "ERR_NVGPUCTRPERM" in ncu.blank_reason(text, 1)
    with pytest.raises(InputError, match="ERR_NVGPUCTRPERM"):
        ncu.parse_csv(text)
    assert ncu.blank_reason("==WARNING== No kernels were profiled.\n") .startswith("ncu profiled no kernel")
    assert ncu.blank_reason("==ERROR== Failed to prepare kernel for profiling\n", 9) == \
        "ncu exited 9: Failed to prepare kernel for profiling"
    assert ncu.blank_reason("") is None


def test_without_ncu_the_host_says_so(monkeypatch):
    monkeypatch.delenv("STRATA_NCU", raising=False)
    monkeypatch.setattr(ncu.shutil, "which", lambda name: None)
    assert ncu.unavailable() == "ncu not found (Nsight Compute: put ncu on PATH or set STRATA_NCU)"
    monkeypatch.setenv("STRATA_NCU", "/opt/nsight/ncu")
    assert ncu.unavailable() is None


def test_units_are_converted_to_base_units():
    assert ncu.to_base("1,204.74", "Kbyte") == pytest.approx(1_204_740)
    assert ncu.to_base("6.17", "Minst") == pytest.approx(6_170_000)
    assert ncu.to_base("14.37", "usecond") == pytest.approx(14.37e-6)
    assert ncu.to_base("66.27", "%") == 66.27 and math.isnan(ncu.to_base("n/a", "byte"))
    with pytest.raises(InputError):
        ncu.to_base("12 bytes", "byte")


def test_the_command_asks_for_every_metric_the_row_needs_in_base_units():
    cmd = ncu.ncu_command(["python3", "-m", "strata_bench", "bench"], "mmvq_new|quantize_q8_1", ncu="/x/ncu")
    assert cmd[:7] == ["/x/ncu", "--csv", "--print-units", "base", "--clock-control", "none", "--metrics"]
    assert set(cmd[7].split(",")) >= {ncu.INST[0], ncu.DRAM_READ, ncu.ISSUE[0], ncu.DRAM_PCT}
    assert cmd[8:] == ["-k", "regex:mmvq_new|quantize_q8_1", "python3", "-m", "strata_bench", "bench"]


def test_the_command_line_prints_a_row_from_ncus_csv_or_says_why_it_is_blank(monkeypatch, tmp_path, capsys):
    """python -m strata_bench.kernels.ncu (gpu_suite's ncu-rows step) with a stand-in ncu that prints the iq1_s
    sample, then with no ncu at all and with one that is refused the counters."""
    model = MMVQ.bytes_moved(MMVQ.case("iq1_s", 131072, 8192, 1, "seed:1"))
    record = f'{{"case": "mmvq/iq1_s/131072x8192/n1/seed:1", "variant": "new", "rows": 131072, "cols": 8192, "bytes": {model}}}'
    fake = tmp_path / "ncu"  # writes bench's record where the command's --results says, then ncu's CSV
    fake.write_text("#!/bin/sh\nprev=''\nfor a in \"$@\"; do\n"
                    f"  if [ \"$prev\" = --results ]; then mkdir -p \"$a/nvidia-h200\"; echo '{record}' > \"$a/nvidia-h200/bench-1.jsonl\"; fi\n"
                    f"  prev=\"$a\"\ndone\ncat '{DATA / 'mmvq_iq1_s_131072x8192_n1.details.csv'}'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("STRATA_NCU", str(fake))
    out = tmp_path / "kept" / "iq1_s.csv"
    assert ncu.main(["--format", "iq1_s", "--cols", "1", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("| mmvq/iq1_s/131072x8192/n1 | mmvq_new<siq::fmt_iq1_s, 1, 4, 3, 4, false> | 2.17 | 2.104e+08 | ")
    assert lines[2].endswith("| 66.3 | 37.1 | issue |") and "off by" not in lines[2]
    assert out.read_text() == (DATA / "mmvq_iq1_s_131072x8192_n1.details.csv").read_text()
    assert f"| {model} | " in lines[2]
    no_record = tmp_path / "ncu-no-bench"  # the CSV but no bench record: no byte model, so no row
    no_record.write_text(f"#!/bin/sh\ncat '{DATA / 'mmvq_iq1_s_131072x8192_n1.details.csv'}'\n")
    no_record.chmod(0o755)
    monkeypatch.setenv("STRATA_NCU", str(no_record))
    assert ncu.main(["--format", "iq1_s"]) == 1
    assert capsys.readouterr().out.endswith("blank: bench wrote no record of variant new (its byte model)\n")
    denied = tmp_path / "ncu-denied"
    denied.write_text(f"#!/bin/sh\ncat '{DATA / 'perm_denied.txt'}'\nexit 1\n")
    denied.chmod(0o755)
    monkeypatch.setenv("STRATA_NCU", str(denied))
    assert ncu.main(["--format", "iq1_s"]) == 1
    assert "blank: ncu may not read the GPU's performance counters" in capsys.readouterr().out
    monkeypatch.delenv("STRATA_NCU")
    monkeypatch.setattr(ncu.shutil, "which", lambda name: None)
    assert ncu.main(["--format", "iq1_s"]) == 1
    assert capsys.readouterr().out == "mmvq/iq1_s/131072x8192/n1: blank: ncu not found (Nsight Compute: put ncu on PATH or set STRATA_NCU)\n"
