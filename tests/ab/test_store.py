"""A/B outcomes rebuilt from the records file equal the live ones."""
from __future__ import annotations

from strata_bench.ab.arms import Arm, RunFailed
from strata_bench.ab.plan import make_plan
from strata_bench.ab.runner import run_ab
from strata_bench.ab.store import outcomes_from_records
from strata_bench.results.store import ResultsWriter, read_records


def _arm(label, values):
    """A fake arm returning the next planted value; a string raises RunFailed with it as reason."""
    it = iter(values)

    def run():
        value = next(it)
        if isinstance(value, str):
            raise RunFailed(value, {"exit_code": 9})
        if isinstance(value, BaseException):
            raise value
        return value

    return Arm(label, run, {"variant": label.lower()})


def test_outcome_rebuilt_from_records_matches_live(tmp_path):
    plan = make_plan("abba", pairs=6, warmup=1, seed=3)
    writer = ResultsWriter(tmp_path, "ab", {})
    a = [1.00, 1.02, 0.98, 1.01, 0.99, 1.03, 1.00]
    b = [1.05, 1.06, 1.04, 1.07, 1.05, 1.08, 1.06]
    live = run_ab(_arm("A", a), _arm("B", b), plan, writer, case="k1")
    writer.close()
    rebuilt = outcomes_from_records(read_records(writer.records_path))
    assert len(rebuilt) == 1 and rebuilt[0].case == "k1"
    assert rebuilt[0].comparison == live.comparison
    assert rebuilt[0].plan == live.plan
