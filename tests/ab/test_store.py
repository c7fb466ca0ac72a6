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
