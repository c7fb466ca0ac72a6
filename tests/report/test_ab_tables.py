"""The seeds' tables of an A/B, exactly: per metric and parameter value A's and B's own values in the
metric's unit, the shift with its CI, dominance, spread within each arm and the verdict; the commands
(server and client) heading the markdown; --unit converting; a failed run's first error line."""
from __future__ import annotations

from strata_bench.ab.plan import make_plan, schedule
from strata_bench.ab.store import outcomes_from_records
from strata_bench.report.ab import ab_markdown, failure_lines

ARMS = {"A": {"argv": ["client", "--port", "8080"], "env": {}, "shell": False, "server": "server --port 8080"},
        "B": {"argv": ["client", "--port", "8080"], "env": {"FAST": "1"}, "shell": False,
              "server": "server --port 8080"}}


def _records(case, params, figures, plan=None, failed=None):
    """A plan record and one run record per scheduled run; figures[arm][metric] lists the run values."""
    plan = plan or make_plan("abba", pairs=3, warmup=0, seed=1, unit="", directions=[("decode", True)],
                             units=[("prefill", "ms"), ("decode", "tok/s")])
    out = [{"record": "plan", "case": case, **plan.to_dict(), "params": [list(p) for p in params], "arms": ARMS}]
    seen = {"A": 0, "B": 0}
    for index, slot in enumerate(schedule("abba", plan.pairs, 0, 1)):
        k = seen[slot.arm]
        seen[slot.arm] += 1
        metrics = {name: values[k] for name, values in figures[slot.arm].items()}
        fail = (failed or {}).get(index)
        out.append({"record": "run", "case": case, "arm": slot.arm, "pair": slot.pair, "position": slot.position,
                    "run_index": index, "warmup": False, "value": None if fail else next(iter(metrics.values()), None),
                    "failure": fail and fail[0], **(fail[1] if fail else {}),
                    "metrics": {} if fail else metrics, "metric_order": list(metrics)})
    return out


SLOW = {"A": {"prefill[128]": [12.8, 12.9, 12.7], "decode": [100.0, 101.0, 99.0]},
        "B": {"prefill[128]": [14.0, 14.2, 14.1], "decode": [91.0, 92.0, 90.5]}}
SAME = {"A": {"prefill[128]": [12.8, 12.9, 12.7], "decode": [100.0, 101.0, 99.0]},
        "B": {"prefill[128]": [12.85, 12.75, 12.8], "decode": [100.5, 99.5, 100.0]}}


def test_the_parameter_table_shows_both_arms_values_units_shift_dominance_spread_and_verdict():
    outcomes = outcomes_from_records(_records("command n=1", [("n", "1")], SAME) +
                                     _records("command n=2", [("n", "2")], SLOW))
    md = ab_markdown(outcomes)
    assert md.startswith("**Commands**\n\n- A: `client --port 8080`\n- A server: `server --port 8080`\n"
                         "- B: `FAST=1 client --port 8080`\n- B server: `FAST=1 server --port 8080`\n\n"
                         "**A/B by parameter**\n\n")
    table = md.split("**A/B by parameter**\n\n")[1].split("\n\n")[0].splitlines()
    assert table == [
        "| metric | n | A | B | B vs A [95% CI] | dominance | spread A / B | verdict |",
        "|---|---|---|---|---|---|---|---|",
        "| prefill[128] (ms) | 1 | 12.80, 12.90, 12.70 ms | 12.85, 12.75, 12.80 ms | +0.10% [-2.53%, +2.60%] "
        "| overlap | 0.78% / 0.39% | UNDECIDED |",
        "| prefill[128] (ms) | 2 | 12.80, 12.90, 12.70 ms | 14.00, 14.20, 14.10 ms | +10.14% [+8.12%, +12.23%] "
        "| every B above every A | 0.78% / 0.71% | SLOWER |",
        "| decode (tok/s, higher) | 1 | 100.0, 101.0, 99.0 tok/s | 100.5, 99.5, 100.0 tok/s | +0.13% [-3.23%, +3.34%] "
        "| overlap | 1.00% / 0.50% | UNDECIDED |",
        "| decode (tok/s, higher) | 2 | 100.0, 101.0, 99.0 tok/s | 91.0, 92.0, 90.5 tok/s | -8.85% [-9.37%, -8.29%] "
        "| every B below every A | 1.00% / 0.84% | SLOWER |"]


def test_a_case_metric_table_has_every_metric_with_its_values_and_paired_difference():
    md = ab_markdown(outcomes_from_records(_records("command", [], SLOW)))
    rows = [line for line in md.splitlines() if line.startswith(("| metric | A |", "| prefill", "| decode"))]
    assert rows == [
        "| metric | A | B | B vs A [95% CI] | B - A (paired) | dominance | spread A / B | verdict |",
        "| prefill[128] (ms) | 12.80, 12.90, 12.70 ms | 14.00, 14.20, 14.10 ms | +10.14% [+8.12%, +12.23%] "
        "| +1.30 +/- 0.25 ms (+10.2%) | every B above every A | 0.78% / 0.71% | SLOWER |",
        "| decode (tok/s, higher) | 100.0, 101.0, 99.0 tok/s | 91.0, 92.0, 90.5 tok/s | -8.85% [-9.37%, -8.29%] "
        "| -8.83 +/- 0.72 tok/s (-8.8%) | every B below every A | 1.00% / 0.84% | SLOWER |"]


def test_many_runs_show_the_mean_and_range():
    plan = make_plan("abba", pairs=4, warmup=0, seed=1, unit="", units=[("prefill", "ms")])
    figures = {"A": {"prefill[128]": [12.8, 12.9, 12.7, 12.8], "x": [1, 1, 1, 1]},
               "B": {"prefill[128]": [14.0, 14.2, 14.1, 14.1], "x": [1, 1, 1, 1]}}
    (outcome,) = outcomes_from_records(_records("command", [], figures, plan))
    (row,) = [line for line in ab_markdown([outcome]).splitlines() if line.startswith("| prefill[128] (ms) |")]
    assert row.startswith("| prefill[128] (ms) | 12.80 (12.70 .. 12.90) ms | 14.10 (14.00 .. 14.20) ms |")


def test_unit_converts_wall_time_rather_than_relabelling_it():
    plan = make_plan("abba", pairs=3, warmup=0, seed=1, unit="ms", value_unit="s")
    records = _records("command", [], {"A": {}, "B": {}}, plan)
    for r, value in zip(records[1:], [0.05216, 0.05320, 0.05310, 0.05206, 0.05226, 0.05330]):
        r.update(value=value, metrics={}, metric_order=[])
    (outcome,) = outcomes_from_records(records)
    rows = [line for line in ab_markdown([outcome]).splitlines() if line.startswith(("| A |", "| B |"))]
    assert rows == ["| A | 3 | 0 | 3 | 52.16 +/- 0.10 ms | 52.16 ms | 52.06 ms .. 52.26 ms | 0 | n/a |",
                    "| B | 3 | 0 | 3 | 53.20 +/- 0.10 ms | 53.2 ms | 53.1 ms .. 53.3 ms | 0 | n/a |"]
    assert outcome.metrics[0].unit == "ms" and outcome.metrics[0].a_values == (52.16, 52.06, 52.26)


def test_a_failed_run_shows_the_first_error_line_of_the_server_not_its_last():
    server = "loading model\nbind: address already in use\nfreeing buffers\nshutting down"
    fail = ("server exited with code 1 before it was ready", {"output_tail": server, "server_tail": server})
    (outcome,) = outcomes_from_records(_records("command", [], SLOW, failed={1: fail}))
    assert failure_lines(outcome) == [
        "run 1 (B, pair 0): server exited with code 1 before it was ready | bind: address already in use"]
