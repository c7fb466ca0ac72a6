"""`compare OLD NEW` logic over results files: bench, ab and parity."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from strata_bench.ab.arms import Arm
from strata_bench.ab.plan import make_plan
from strata_bench.ab.runner import run_ab
from strata_bench.ab.store import finish
from strata_bench.cli.main import cli
import json
import shutil
from pathlib import Path

from strata_bench.errors import InputError
from strata_bench.results.compare import compare_files, judge
from strata_bench.results.guard import ProvenanceMismatch
from strata_bench.stats.intervals import Interval
from strata_bench.stats.ratio import RatioEstimate, benjamini_hochberg
from strata_bench.results.store import ResultsWriter
from strata_bench.stats.criteria import Criteria

COMMITTED = Path(__file__).resolve().parents[2] / "tests" / "data" / "results"  # two H200 runs of an earlier tree
BASE, SECOND = COMMITTED / "bench-20261201T094112Z.json", COMMITTED / "bench-20261201T100617Z.json"





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
    res = CliRunner().invoke(cli, ["compare", str(old), str(new), "--fail-on-regression", "20", "-o", "md"])
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
    assert {d.name: d.result.estimate.n_old for d in result.deltas} == {"case1 / A": 4, "case1 / B": 4}  # no warm-ups


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


def _sampled(records_file, root, samples):
    recs = [{"case": case, "variant": "new", "median_us": sorted(v)[len(v) // 2], "samples_us": v}
            for case, v in samples.items()]
    return records_file(root, "bench", recs)


def test_compare_bench_uses_samples_us_and_adjusts_p_by_bh(tmp_path, records_file):
    base = [10.0, 10.02, 9.98, 10.01, 9.99]
    old = _sampled(records_file, tmp_path / "o", {"same": base, "slow": base, "fast": base})
    new = _sampled(records_file, tmp_path / "n", {"same": base, "slow": [v * 1.05 for v in base],
                                                   "fast": [v * 0.9 for v in base]})
    result = compare_files(old, new, Criteria(fail_on_regression=0.02))
    by = {d.name: d for d in result.deltas}
    assert {n: d.verdict for n, d in by.items()} == {"same / new": "SAME", "slow / new": "SLOWER",
                                                      "fast / new": "FASTER"}
    assert by["slow / new"].result.ratio == pytest.approx(1.05) and by["slow / new"].regression
    assert by["same / new"].result.estimate.ci.method == "welch t on log values"
    assert [d.result.q for d in result.deltas] == benjamini_hochberg([d.result.estimate.p for d in result.deltas])
    assert result.counts == {"FASTER": 1, "SLOWER": 1, "SAME": 1, "UNDECIDED": 0} and result.n_tested == 3
    assert result.geomean.value == pytest.approx((1.05 * 0.9) ** (1 / 3))
    assert result.unchecked[-1] == "kernels_src hash (not in either file)"


CRIT = Criteria(same_band=0.01, fail_on_regression=0.02)


def test_judge_bh_step_and_threshold_exact():
    slow = RatioEstimate(10, 10, 1.05, Interval(1.03, 1.07, "m"), 0.001)
    r = judge(slow, 0.004, CRIT, 20)
    assert (r.verdict.value, r.reason, r.regression, r.regression_reason) == (
        "SLOWER", "NEW is worse (lower is better), beyond the +/-1.0% threshold", True,
        "regression: NEW is worse by at least 3.0%, beyond 2.0%")
    r = judge(slow, 0.12, CRIT, 20)  # the same case, not a discovery among 20
    assert (r.verdict.value, r.reason, r.regression, r.regression_reason) == (
        "UNDECIDED", "a change alone (p=0.001), not after Benjamini-Hochberg over 20 cases (q=0.12 > 0.05)",
        False, "worse by at least 3.0%, but not a discovery after Benjamini-Hochberg")
    small = RatioEstimate(10, 10, 1.008, Interval(1.005, 1.011, "m"), 1e-6)
    assert judge(small, 1e-5, CRIT).reason == "a change is resolved (+0.8%) but lies within the +/-1.0% threshold"
    wide = RatioEstimate(10, 10, 1.01, Interval(0.98, 1.04, "m"), 0.4)
    assert judge(wide, 0.5, CRIT).reason == ("interval includes no change and reaches past the +/-1.0% threshold; "
                                             "more samples may decide")
    inside = RatioEstimate(10, 10, 1.002, Interval(0.995, 1.009, "m"), 0.4)
    assert judge(inside, 0.5, CRIT).verdict.value == "SAME"
    assert judge(inside, 0.5, Criteria(same_band=0.005)).verdict.value == "UNDECIDED"  # --threshold 0.5
    fast = RatioEstimate(10, 10, 0.95, Interval(0.93, 0.97, "m"), 0.001)
    assert judge(fast, 0.001, Criteria(higher_is_better=True, fail_on_regression=0.02)).regression


def _copy_committed(where: Path, **provenance) -> Path:
    where.mkdir()
    for src in (BASE, BASE.with_suffix(".jsonl")):
        shutil.copy(src, where / src.name)
    summary = json.loads((where / BASE.name).read_text())
    summary["provenance"].update(provenance)
    (where / BASE.name).write_text(json.dumps(summary))
    return where / BASE.name


def test_committed_bench_files_compare_and_the_suite_command_still_works():
    result = compare_files(BASE, SECOND, Criteria(fail_on_regression=0.02))
    assert result.differences == () and result.unchecked == () and len(result.deltas) == 66
    assert all(d.result.estimate.n_old == 10 and d.result.q is not None for d in result.deltas)
    res = CliRunner().invoke(cli, ["compare", str(BASE), str(SECOND), "--fail-on-regression", "2", "-o", "md"])
    assert res.exit_code == 1, res.output
    assert "- 66 cases: 1 FASTER, 8 SLOWER, 52 SAME, 5 UNDECIDED\n" in res.stdout
    assert "- threshold +/-1.0%; Benjamini-Hochberg over 66 cases at a 5% false discovery rate\n" in res.stdout
    assert res.stderr.strip().startswith("compare: 5 case(s) regressed: mmvq/iq4_xs/131072x8192/n1/seed:1 / old,")


def test_files_with_different_kernels_src_hash_are_refused(tmp_path):
    edited = _copy_committed(tmp_path / "edited", kernels_src_hash="0" * 64)
    with pytest.raises(ProvenanceMismatch):
        compare_files(BASE, edited, Criteria())
    res = CliRunner().invoke(cli, ["compare", str(BASE), str(edited), "-o", "md"])
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr == ("compare: OLD and NEW were measured under different conditions: kernels_src hash "
                          "(OLD 2022c4b36bf5, NEW 000000000000); pass --allow-different to compare them anyway\n")
    res = CliRunner().invoke(cli, ["compare", str(BASE), str(edited), "-o", "md", "--allow-different"])
    assert res.exit_code == 0 and ("- compared despite different conditions (--allow-different): kernels_src hash "
                                   "(OLD 2022c4b36bf5, NEW 000000000000)\n") in res.stdout
    # a file against itself: every ratio 1; one case is too noisy (CI wider than +/-1%) to call SAME
    assert "- 66 cases: 0 FASTER, 0 SLOWER, 65 SAME, 1 UNDECIDED\n" in res.stdout


def test_files_with_closures_compare_the_families_both_measured(tmp_path):
    """An edit to a kernel neither file's families compiled (another kernels_src hash) does not refuse the
    pair; a change in a family both measured does, naming the family and file."""
    from strata_bench.results.closures import ClosureRecord, Unit

    def record(sha: str) -> dict:
        return ClosureRecord((("kernels_src/mmvq/mmvq.cu", sha),), (Unit("kernels_src/mmvq/mmvq.cu", ()),)).to_json()

    old = _copy_committed(tmp_path / "old", sources={"mmvq": record("a" * 64)})
    new = _copy_committed(tmp_path / "new", kernels_src_hash="0" * 64, sources={"mmvq": record("a" * 64)})
    res = CliRunner().invoke(cli, ["compare", str(old), str(new), "-o", "md"])
    assert res.exit_code == 0 and "- 66 cases: 0 FASTER, 0 SLOWER, 65 SAME, 1 UNDECIDED\n" in res.stdout
    edited = _copy_committed(tmp_path / "edited", sources={"mmvq": record("b" * 64)})
    res = CliRunner().invoke(cli, ["compare", str(old), str(edited), "-o", "md"])
    assert res.exit_code == 2
    assert res.stderr == ("compare: OLD and NEW were measured under different conditions: mmvq sources: "
                          f"kernels_src/mmvq/mmvq.cu changed (OLD {record('a' * 64)['hash'][:12]}, "
                          f"NEW {record('b' * 64)['hash'][:12]}); pass --allow-different to compare them anyway\n")
    assert CliRunner().invoke(cli, ["compare", str(old), str(edited), "--allow-different"]).exit_code == 0


def test_threshold_option_and_its_older_name(tmp_path, records_file):
    base = [10.0, 10.1, 9.9, 10.05, 9.95]
    old = _sampled(records_file, tmp_path / "o", {"c": base})
    new = _sampled(records_file, tmp_path / "n", {"c": [v * 1.03 for v in base]})
    for option in ("--threshold", "--same-band"):
        res = CliRunner().invoke(cli, ["compare", str(old), str(new), option, "5", "-o", "json"])
        data = json.loads(res.stdout)
        assert res.exit_code == 0 and data["counts"]["SAME"] == 1 and data["threshold"] == 0.05
    res = CliRunner().invoke(cli, ["compare", str(old), str(new), "--threshold", "1", "-o", "json"])
    assert json.loads(res.stdout)["cases"][0]["verdict"] == "SLOWER"


def _ms_file(root, seconds):
    """A command A/B whose runs are wall seconds and whose plan shows them in ms (--unit ms)."""
    writer = ResultsWriter(root, "ab", {"devices": []})
    plan = make_plan("abba", pairs=4, warmup=0, seed=5, unit="ms", value_unit="s")
    values = iter(seconds * 2)
    arm = lambda label: Arm(label, lambda: next(values), {"argv": ["prog"], "env": {}})
    return finish(writer, [run_ab(arm("A"), arm("B"), plan, writer, case="c")])


def test_compare_shows_a_command_ab_in_its_plans_unit(tmp_path):
    old = _ms_file(tmp_path / "o", [0.07685, 0.07685, 0.07685, 0.07685])
    new = _ms_file(tmp_path / "n", [0.07685, 0.07685, 0.07685, 0.07685])
    result = compare_files(old, new, Criteria())
    assert result.unit == "ms"
    assert {d.name: d.old for d in result.deltas} == {"c / A": pytest.approx((76.85,) * 4),
                                                      "c / B": pytest.approx((76.85,) * 4)}  # not 0.07685 "ms"
