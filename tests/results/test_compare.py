"""`compare OLD NEW` logic over results files: bench, ab and parity."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from strata_bench.ab.arms import Arm
from strata_bench.ab.plan import make_plan
from strata_bench.ab.runner import run_ab
from strata_bench.ab.store import finish
from strata_bench.cli.main import cli
from strata_bench.errors import InputError
from strata_bench.results.compare import compare_files
from strata_bench.results.store import ResultsWriter
from strata_bench.stats.criteria import Criteria





def _bench(records_file, root, medians):
    recs = [{"case": case, "variant": var, "median_us": us} for (case, var), us in medians.items()]
    return records_file(root, "bench", recs)


def test_compare_bench_flags_regression(tmp_path, records_file):
    old = _bench(records_file, tmp_path / "old", {("c1", "new"): 10.0, ("c2", "new"): 20.0, ("gone", "new"): 1.0})
    new = _bench(records_file, tmp_path / "new", {("c1", "new"): 11.0, ("c2", "new"): 20.05, ("added", "new"): 1.0})
    result = compare_files(old, new, Criteria(fail_on_regression=0.05))
    by_name = {d.name: d for d in result.deltas}
    assert by_name["c1 / new"].regression and by_name["c1 / new"].result.ratio == pytest.approx(1.1)
    assert not by_name["c2 / new"].regression and by_name["c2 / new"].result.verdict.value == "SAME"
    assert result.only_old == ("gone / new",) and result.only_new == ("added / new",)
    res = CliRunner().invoke(cli, ["compare", str(old), str(new), "--fail-on-regression", "5"])
    assert res.exit_code == 1 and "c1 / new" in res.output
    res = CliRunner().invoke(cli, ["compare", str(old), str(new), "--fail-on-regression", "20", "--format", "md"])
    assert res.exit_code == 0 and "- only in OLD: gone / new" in res.stdout


def test_compare_leaves_out_rejected_timings(tmp_path, ab_file, records_file):
    # A bench variant whose timed outputs differed, and an ab case with a "rejected" record, are not
    # results: they show as only in one file, never as a ratio.
    old = _bench(records_file, tmp_path / "old", {("c1", "new"): 10.0, ("c2", "new"): 20.0})
    recs = [{"case": "c1", "variant": "new", "median_us": 0.2, "status": "timed output differs: new copy 0 of 3"},
            {"case": "c2", "variant": "new", "median_us": 20.0, "status": "timed"}]
    new = records_file(tmp_path / "new", "bench", recs)
    result = compare_files(old, new, Criteria())
    assert [d.name for d in result.deltas] == ["c2 / new"] and result.only_old == ("c1 / new",)
    old_ab, _, _ = ab_file(tmp_path / "o", [1.0] * 5, [1.0] * 5)
    new_ab, records, _ = ab_file(tmp_path / "n", [1.0] * 5, [0.1] * 5)
    with open(records, "a") as f:
        f.write('{"record": "rejected", "case": "case1", "reason": "impossible: ..."}\n')
    result = compare_files(old_ab, new_ab, Criteria())
    assert result.deltas == () and result.only_old == ("case1 / A", "case1 / B")


def test_compare_ab_files_by_case_and_arm(tmp_path, ab_file):
    old, _, _ = ab_file(tmp_path / "o", [1.0, 1.0, 1.01, 0.99, 1.0], [1.0, 1.0, 1.01, 0.99, 1.0])
    new, _, _ = ab_file(tmp_path / "n", [1.0, 1.0, 1.01, 0.99, 1.0], [1.2, 1.2, 1.21, 1.19, 1.2])
    result = compare_files(old, new, Criteria(fail_on_regression=0.05))
    assert [d.name for d in result.regressions] == ["case1 / B"]
    assert {d.name: d.result.n_old for d in result.deltas} == {"case1 / A": 4, "case1 / B": 4}  # no warm-ups


def test_compare_parity_pass_to_fail_is_a_regression(tmp_path, records_file):
    old = records_file(tmp_path / "o", "parity", [{"case": "c", "status": "PASS"}])
    new = records_file(tmp_path / "n", "parity", [{"case": "c", "status": "FAIL"}])
    result = compare_files(old, new, Criteria())
    assert result.regressions[0].status_change == "PASS -> FAIL"
    with pytest.raises(InputError, match="cannot compare"):
        compare_files(old, _bench(records_file, tmp_path / "b", {("c", "v"): 1.0}), Criteria())


def test_compare_ab_files_with_several_metrics_per_metric_direction(tmp_path):
    from strata_bench.ab.arms import Sample

    def file(where, slower):
        writer = ResultsWriter(where, "ab", {"devices": []})
        plan = make_plan("abba", pairs=4, warmup=0, seed=5, directions=[("tps", True)])
        values = iter([1.0, 1.01, 0.99, 1.0] * 2)

        def run():
            v = next(values) * slower
            return Sample(v, {}, {"ms": v, "tps": 100 / v})

        outcome = run_ab(Arm("A", run, {}), Arm("B", run, {}), plan, writer, case="c")
        return finish(writer, [outcome])

    result = compare_files(file(tmp_path / "o", 1.0), file(tmp_path / "n", 1.2), Criteria(fail_on_regression=0.05))
    assert result.value_column == "metrics"
    assert [d.name for d in result.deltas] == ["c / A / ms", "c / A / tps", "c / B / ms", "c / B / tps"]
    assert {d.name: d.result.verdict.value for d in result.deltas} == {
        "c / A / ms": "SLOWER", "c / A / tps": "SLOWER", "c / B / ms": "SLOWER", "c / B / tps": "SLOWER"}
    assert len(result.regressions) == 4
