"""report / compare / plot over results files written by ResultsWriter."""
from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner

from strata_bench.ab import runner as R
from strata_bench.report import files as report
from strata_bench.cli.main import cli
from strata_bench.errors import InputError
from strata_bench.results.store import ResultsWriter


def _values(values):
    it = iter(values)

    def run():
        value = next(it)
        if isinstance(value, str):
            raise R.RunFailed(value, {"output_tail": "last line\n"})
        return value

    return run


def _ab_file(tmp_path, a, b, name="case1", pairs=4, warmup=1):
    writer = ResultsWriter(tmp_path, "ab", {"devices": []})
    plan = R.make_plan("abba", pairs=pairs, warmup=warmup, seed=5, max_failures="50%")
    outcome = R.run_ab(R.Arm("A", _values(a), {"argv": ["prog"], "env": {}}),
                       R.Arm("B", _values(b), {"argv": ["prog"], "env": {"X": "1"}}), plan, writer, case=name)
    return R.finish(writer, [outcome]), writer.records_path, outcome


def _records_file(tmp_path, kind, records):
    writer = ResultsWriter(tmp_path, kind, {})
    for record in records:
        writer.append(record)
    return writer.finish({"n": len(records)}, 0)


def _render(path, fmt):
    return report.text_of(report.render_file, path, fmt)


def test_ab_summary_and_records_render_the_same_verdict(tmp_path):
    summary, records, live = _ab_file(tmp_path, [1.0, 1.0, 1.01, 0.99, 1.0], [1.1, 1.1, "exit code 1", 1.09, 1.1])
    for path in (summary, records):
        body = json.loads(_render(path, "json"))
        assert body["cases"][0]["verdict"] == live.comparison.verdict.value == "SLOWER"
        assert body["cases"][0]["failures"][0]["reason"] == "exit code 1"
    table = _render(summary, "table")
    assert "verdict" in table and "X=1 prog" in table
    assert "exit code 1 | last line" in table
    md = _render(summary, "md")
    assert md.startswith("**A/B: `case1`**") and "| **ratio B/A [95% CI]** |" in md


def test_ab_csv_is_one_row_per_run(tmp_path):
    summary, _, live = _ab_file(tmp_path, [1.0] * 5, [2.0] * 5)
    rows = list(csv.DictReader(io.StringIO(_render(summary, "csv"))))
    assert len(rows) == len(live.runs) == 10
    assert list(rows[0])[:6] == ["case", "run_index", "pair", "position", "arm", "warmup"]
    assert rows[0]["arm"] == "B" and rows[0]["warmup"] == "True"


def test_parity_view_picks_its_columns(tmp_path):
    recs = [{"case": "mmvq/q8_0/64x256/n1/seed:1", "status": "PASS", "worst_ratio": 1e-7, "device": 0,
             "seconds": 0.1, "error": "", "checks": [{"check": "bitwise", "ok": True}]},
            {"case": "mmvq/q8_0/64x256/n8/seed:1", "status": "FAIL", "worst_ratio": 0.5, "device": 0,
             "seconds": 0.1, "error": "bitwise: 3 differ", "checks": []}]
    path = _records_file(tmp_path, "parity", recs)
    md = _render(path, "md").splitlines()
    assert md[0] == "| case | status | worst_ratio | device | seconds | error |"
    assert "FAIL" in md[3] and "checks" not in md[0]


def test_unknown_kind_renders_generic_columns(tmp_path):
    path = _records_file(tmp_path, "sweep", [{"name": "x", "nested": {"a": 1}, "tags": [1, 2]}])
    body = json.loads(_render(path, "json"))
    assert body == [{"name": "x", "nested.a": 1, "tags": "1, 2"}]
    assert "sweep" in _render(path, "table")


def test_bad_files_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="not found"):
        report.load(tmp_path / "missing.json")
    bad = tmp_path / "x.txt"
    bad.write_text("hi")
    with pytest.raises(InputError, match=".json summary or a .jsonl"):
        report.load(bad)
    summary = _records_file(tmp_path / "s", "bench", [{"case": "c"}])
    summary.with_suffix(".jsonl").unlink()
    with pytest.raises(InputError, match="records file .* is missing"):
        report.load(summary)


def _bench(tmp_path, medians):
    recs = [{"case": case, "variant": var, "median_us": us} for (case, var), us in medians.items()]
    return _records_file(tmp_path, "bench", recs)


def test_compare_bench_flags_regression(tmp_path):
    old = _bench(tmp_path / "old", {("c1", "new"): 10.0, ("c2", "new"): 20.0, ("gone", "new"): 1.0})
    new = _bench(tmp_path / "new", {("c1", "new"): 11.0, ("c2", "new"): 20.05, ("added", "new"): 1.0})
    result = report.compare_files(old, new, report.S.Criteria(fail_on_regression=0.05))
    by_name = {d.name: d for d in result.deltas}
    assert by_name["c1 / new"].regression and by_name["c1 / new"].result.ratio == pytest.approx(1.1)
    assert not by_name["c2 / new"].regression and by_name["c2 / new"].result.verdict.value == "SAME"
    assert result.only_old == ("gone / new",) and result.only_new == ("added / new",)
    res = CliRunner().invoke(cli, ["compare", str(old), str(new), "--fail-on-regression", "5"])
    assert res.exit_code == 1 and "c1 / new" in res.output
    res = CliRunner().invoke(cli, ["compare", str(old), str(new), "--fail-on-regression", "20", "--format", "md"])
    assert res.exit_code == 0 and "- only in OLD: gone / new" in res.stdout


def test_compare_ab_files_by_case_and_arm(tmp_path):
    old, _, _ = _ab_file(tmp_path / "o", [1.0, 1.0, 1.01, 0.99, 1.0], [1.0, 1.0, 1.01, 0.99, 1.0])
    new, _, _ = _ab_file(tmp_path / "n", [1.0, 1.0, 1.01, 0.99, 1.0], [1.2, 1.2, 1.21, 1.19, 1.2])
    result = report.compare_files(old, new, report.S.Criteria(fail_on_regression=0.05))
    assert [d.name for d in result.regressions] == ["case1 / B"]
    assert {d.name: d.result.n_old for d in result.deltas} == {"case1 / A": 4, "case1 / B": 4}  # no warm-ups


def test_compare_parity_pass_to_fail_is_a_regression(tmp_path):
    old = _records_file(tmp_path / "o", "parity", [{"case": "c", "status": "PASS"}])
    new = _records_file(tmp_path / "n", "parity", [{"case": "c", "status": "FAIL"}])
    result = report.compare_files(old, new, report.S.Criteria())
    assert result.regressions[0].status_change == "PASS -> FAIL"
    with pytest.raises(InputError, match="cannot compare"):
        report.compare_files(old, _bench(tmp_path / "b", {("c", "v"): 1.0}), report.S.Criteria())


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    summary, _, _ = _ab_file(tmp_path, [1.0, 1.0, 1.01, 0.99, 1.0], [1.1, "timed out", 1.12, 1.09, 1.1])
    out = tmp_path / "ab.png"
    res = CliRunner().invoke(cli, ["plot", str(summary), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    parity = _records_file(tmp_path / "p", "parity", [{"case": "c", "status": "PASS"}])
    res = CliRunner().invoke(cli, ["plot", str(parity)])
    assert res.exit_code == 2 and "plot draws A/B results" in res.output


def test_report_cli(tmp_path):
    summary, _, _ = _ab_file(tmp_path, [1.0] * 5, [1.0] * 5)
    res = CliRunner().invoke(cli, ["report", str(summary), "--format", "md"])
    assert res.exit_code == 0 and "SAME" in res.stdout
    res = CliRunner().invoke(cli, ["report", str(tmp_path / "nope.json")])
    assert res.exit_code == 2
