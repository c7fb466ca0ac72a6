"""`ab`'s hyperfine conveniences: -P scans, -n names, --ignore-failure, --show-output, the exports and
each run's user and system CPU."""
from __future__ import annotations

import csv
import io
import json
import os
import shlex
import sys

import pytest
from click.testing import CliRunner

from strata_bench.ab.matrix import scan
from strata_bench.cli.main import cli
from strata_bench.errors import InputError
from strata_bench.results.store import read_records

PY = sys.executable
METRIC = r"v=(?P<value>[0-9.]+)"


@pytest.fixture(autouse=True)
def _fast_provenance(monkeypatch):
    import strata_bench.cli.ab as ab_cmd

    monkeypatch.setattr(ab_cmd, "_provenance", lambda: {"devices": []})


def _ab(tmp_path, *args):
    return CliRunner().invoke(cli, ["ab", "--results", str(tmp_path / "res"), "-q", "--warmup", "0", *args])


def _printer(code: str) -> str:
    return shlex.join([PY, "-c", code])


def test_scan_values_are_the_decimals_as_written():
    assert scan("n", "1", "3") == ["1", "2", "3"]
    assert scan("t", "0.1", "0.5", "0.2") == ["0.1", "0.3", "0.5"]
    assert scan("t", "0", "1", "0.25") == ["0.00", "0.25", "0.50", "0.75", "1.00"]
    with pytest.raises(InputError, match=r"^-P n 3 1: need finite MIN <= MAX and --step > 0, got step 1$"):
        scan("n", "3", "1")
    with pytest.raises(InputError, match=r"^-P n 1 x: not numbers$"):
        scan("n", "1", "x")
    with pytest.raises(InputError, match=r"^-P n 1 5000 makes 5000 values, more than 1000$"):
        scan("n", "1", "5000")


def test_a_scan_expands_into_one_case_per_value_substituted(tmp_path):
    res = _ab(tmp_path, "--pairs", "1", "-P", "n", "1", "3", "--metric", METRIC, "-o", "json",
              "--", PY, "-c", "print('v={n}')")
    assert res.exit_code == 0, res.output
    cases = json.loads(res.stdout)["cases"]
    assert [(c["case"], c["params"], c["metrics"][0]["A_values"]) for c in cases] == [
        ("command n=1", {"n": "1"}, [1.0]), ("command n=2", {"n": "2"}, [2.0]), ("command n=3", {"n": "3"}, [3.0])]


@pytest.mark.parametrize("args,line", [
    (["-P", "n", "1", "2", "--param", "n=5"], "-P n and --param n both give 'n' values"),
    (["--step", "2"], "--step applies to a -P NAME MIN MAX scan"),
    (["-n", "a", "-n", "b", "-n", "c"], "-n/--name names A and B: give it at most twice, got 3"),
    (["--export-csv", "{tmp}/missing/x.csv"], "cannot export csv to {tmp}/missing/x.csv: {tmp}/missing does not exist"),
    # Only the folder was checked: these failed after the whole run, with a traceback.
    (["--export-json", ""], "cannot export json to '': the path is empty"),
    (["--export-csv", "{tmp}"], "cannot export csv to {tmp}: it is a folder"),
    (["--export-markdown", "{tmp}/fifo"], "cannot export md to {tmp}/fifo: No such device or address"),
])
def test_convenience_misuse_is_one_line_exit_2(tmp_path, args, line):
    os.mkfifo(tmp_path / "fifo")  # no reader: a write would block, or fail at the end
    res = _ab(tmp_path, *(a.format(tmp=tmp_path) for a in args), "--", "true")
    assert res.exit_code == 2
    assert res.stderr.splitlines() == [line.format(tmp=tmp_path)]
    assert not (tmp_path / "res").exists()


def test_names_head_the_commands_and_label_the_arms(tmp_path):
    a, b = _printer("print('v=10')"), _printer("print('v=11')")
    res = _ab(tmp_path, "--pairs", "2", "-n", "old", "-n", "new", "--metric", METRIC, "--a", a, "--b", b,
              "-o", "md")
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith(f"**Commands**\n\n- A (old): `{a}`\n- B (new): `{b}`\n")
    rows = [line.split(" | ")[0] for line in res.stdout.splitlines() if line.startswith(("| A", "| B"))]
    assert rows == ["| A (old)", "| B (new)"]


def test_ignore_failure_counts_runs_that_exit_nonzero(tmp_path):
    code = _printer("import sys; print('v=10'); sys.exit(3)")
    res = _ab(tmp_path, "--pairs", "2", "--metric", METRIC, "--a", code, "--b", code)
    assert res.exit_code == 1  # without it every run fails
    res = _ab(tmp_path, "--pairs", "2", "--metric", METRIC, "-i", "--a", code, "--b", code, "-o", "json")
    assert res.exit_code == 0, res.output
    case = json.loads(res.stdout)["cases"][0]
    assert case["failures"] == [] and case["metrics"][0]["A_values"] == [10.0, 10.0]
    summary = next(line for line in res.stderr.splitlines() if line.startswith("results: "))[len("results: "):]
    runs = [r for r in read_records(summary) if r["record"] == "run"]
    assert [r["exit_code"] for r in runs] == [3, 3, 3, 3]


def test_show_output_prints_each_run_output_to_stderr(tmp_path):
    res = _ab(tmp_path, "--pairs", "1", "--metric", METRIC, "--show-output", "--", PY, "-c", "print('v=10')")
    assert res.exit_code == 0, res.output
    assert res.stderr.count("--- output ---\nv=10\n") == 2


def test_exports_write_the_markdown_json_and_a_csv_row_per_run(tmp_path):
    md, js, cs = tmp_path / "ab.md", tmp_path / "ab.json", tmp_path / "ab.csv"
    res = _ab(tmp_path, "--pairs", "2", "--metric", METRIC, "-o", "md", "--export-markdown", md,
              "--export-json", js, "--export-csv", cs, "--", PY, "-c", "print('v=10')")
    assert res.exit_code == 0, res.output
    assert md.read_text() == res.stdout
    assert json.loads(js.read_text())["cases"][0]["verdict"] == "SAME"
    rows = list(csv.DictReader(io.StringIO(cs.read_text())))
    assert [(r["arm"], r["value"]) for r in rows] == [("A", "10.0"), ("B", "10.0"), ("B", "10.0"), ("A", "10.0")]
    assert res.stderr.splitlines()[-3:] == [f"exported md: {md}", f"exported json: {js}", f"exported csv: {cs}"]


def test_each_run_records_its_user_and_system_cpu(tmp_path):
    burn = _printer("sum(i * i for i in range(3 * 10**6))")
    res = _ab(tmp_path, "--pairs", "2", "--a", burn, "--b", burn, "-o", "md")
    assert res.exit_code == 0, res.output
    runs = [r for r in read_records(next((tmp_path / "res").rglob("ab-*.json"))) if r["record"] == "run"]
    assert all(r["cpu_user_s"] > 0.05 and r["cpu_system_s"] >= 0 for r in runs)  # 3e6 squares: ~0.2 s of user
    assert "| arm | runs | failed | n | mean +/- sd | median | min .. max | outliers | CPU user / sys |" in res.stdout
