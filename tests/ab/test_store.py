"""A/B outcomes rebuilt from the records file equal the live ones."""
from __future__ import annotations

from strata_bench.ab.plan import make_plan
from strata_bench.ab.runner import run_ab
from strata_bench.ab.store import outcomes_from_records
from strata_bench.results.store import ResultsWriter, read_records



def test_outcome_rebuilt_from_records_matches_live(tmp_path, planted_arm):
    plan = make_plan("abba", pairs=6, warmup=1, seed=3)
    writer = ResultsWriter(tmp_path, "ab", {})
    a = [1.00, 1.02, 0.98, 1.01, 0.99, 1.03, 1.00]
    b = [1.05, 1.06, 1.04, 1.07, 1.05, 1.08, 1.06]
    live = run_ab(planted_arm("A", a), planted_arm("B", b), plan, writer, case="k1")
    writer.close()
    rebuilt = outcomes_from_records(read_records(writer.records_path))
    assert len(rebuilt) == 1 and rebuilt[0].case == "k1"
    assert rebuilt[0].comparison == live.comparison
    assert rebuilt[0].plan == live.plan


def _run_record(arm, pair, index, same, failure=None):
    return {"record": "run", "case": "command", "arm": arm, "pair": pair, "position": index % 2,
            "run_index": index, "warmup": False, "value": None if failure else 1.0, "failure": failure,
            "same": same}


def test_an_interrupted_run_whose_b_arm_never_ran_shows_b_missing():
    """The report of an interrupted run judges identity only where both arms printed the value."""
    from strata_bench.ab.plan import plan_from_json
    from strata_bench.report.ab import identity_rows

    plan = {"record": "plan", "case": "command", **make_plan("abba", pairs=3, warmup=0, seed=1).to_dict()}
    records = [plan, _run_record("A", 0, 0, {"logits[128]": "abc"}),
               {"record": "interrupted", "case": "command", "run_index": 1, "error": "KeyboardInterrupt"}]
    outcome = outcomes_from_records(records)[0]
    assert plan_from_json(plan).allow_missing is False
    assert identity_rows(outcome) == [["logits[128]", "abc", "missing", "MISSING: B has no successful run"]]
    assert outcome.identity_failures == list(outcome.identity)
    assert outcome.failed_arms == ["B: no measured run"]


def test_a_key_one_arm_never_printed_and_a_silent_run_are_missing():
    from strata_bench.report.ab import identity_rows

    plan = {"record": "plan", "case": "command", **make_plan("ab", pairs=2, warmup=0, seed=1).to_dict()}
    records = [plan, _run_record("A", 0, 0, {"h[1]": "x", "h[2]": "y"}), _run_record("B", 0, 1, {"h[1]": "x"}),
               _run_record("A", 1, 2, {"h[1]": "x", "h[2]": "y"}), _run_record("B", 1, 3, {"h[1]": None}),
               _run_record("B", 1, 4, {"h[1]": "z"}, failure="exit code 1")]  # a failed run is no evidence
    outcome = outcomes_from_records(records)[0]
    assert identity_rows(outcome) == [
        ["h[1]", "x", "x", "MISSING: run 3 (B, pair 1) printed nothing for it"],
        ["h[2]", "y", "missing", "MISSING: no run of B printed it"]]
    allowed = outcomes_from_records([{**plan, "allow_missing": True}, *records[1:]])[0]
    assert allowed.identity_failures == [] and allowed.plan.allow_missing
    assert "output 'h[2]' is missing: no run of B printed it (allowed by --allow-missing)" in allowed.notes()
