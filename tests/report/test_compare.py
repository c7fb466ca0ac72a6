"""`compare` output on hand-built comparisons: markdown, CSV and JSON, exactly."""
from __future__ import annotations

import io

from rich.console import Console

from strata_bench.report.compare import render_compare, shown
from strata_bench.results.compare import CaseDelta, FileComparison
from strata_bench.stats.criteria import Criteria
from strata_bench.stats.verdict import compare_samples

CRITERIA = Criteria(fail_on_regression=0.05)
SLOWER = compare_samples([10.0], [11.0], CRITERIA)  # one value a side: the bare ratio, 10% worse
SAME = compare_samples([2.0, 2.1, 1.9], [2.0, 2.1, 1.9], CRITERIA)
BENCH = FileComparison("bench", "median_us",
                       (CaseDelta(("c1", "new"), (10.0,), (11.0,), SLOWER, regression=SLOWER.regression),
                        CaseDelta(("c2", "new"), (2.0, 2.1, 1.9), (2.0, 2.1, 1.9), SAME)),
                       ("gone / new",), ("added / new",))
PARITY = FileComparison("parity", "status", (CaseDelta(("a",), "PASS", "FAIL", None, "PASS -> FAIL", True),
                                             CaseDelta(("b",), "PASS", "PASS", None, "PASS")), (), ())
AB = FileComparison("ab", "value", (CaseDelta(("k", "B"), (0.5, 0.52), (0.25, 0.26),
                                              compare_samples([0.5, 0.52], [0.25, 0.26], CRITERIA)),), (), (), unit="s")

BENCH_MD = (
    '| case | old | new | NEW/OLD | NEW vs OLD 95% CI | verdict | reason |\n'
    '|---|---|---|---|---|---|---|\n'
    '| c1 / new | 10 | 11 | 1.1000 | n/a | SLOWER (REGRESSION) | single values, no interval: NEW/OLD = 1.1000 (+10.0%): NEW is worse; regression: NEW is worse by 10.0%, beyond 5.0% |\n'
    '| c2 / new | 2 (n=3) | 2 (n=3) | 1.0000 | [-11.3%, +11.3%] | UNDECIDED | 95% CI of NEW vs OLD is [-11.3%, +11.3%]: it includes 0 and reaches past the +/-1.0% band; more pairs may decide; no regression beyond 5.0% (NEW worse by at most 11.3%) |\n'
    '\n'
    '- only in OLD: gone / new\n'
    '- only in NEW: added / new\n'
    ''
)

BENCH_CSV = (
    'case,old,new,NEW/OLD,NEW vs OLD 95% CI,verdict,reason\n'
    'c1 / new,10,11,1.1000,n/a,SLOWER (REGRESSION),"single values, no interval: NEW/OLD = 1.1000 (+10.0%): NEW is worse; regression: NEW is worse by 10.0%, beyond 5.0%"\n'
    'c2 / new,2 (n=3),2 (n=3),1.0000,"[-11.3%, +11.3%]",UNDECIDED,"95% CI of NEW vs OLD is [-11.3%, +11.3%]: it includes 0 and reaches past the +/-1.0% band; more pairs may decide; no regression beyond 5.0% (NEW worse by at most 11.3%)"\n'
    ''
)

BENCH_JSON = (
    '{\n'
    '  "kind": "bench",\n'
    '  "value": "median_us",\n'
    '  "cases": [\n'
    '    {\n'
    '      "case": "c1 / new",\n'
    '      "old": "10",\n'
    '      "new": "11",\n'
    '      "NEW/OLD": "1.1000",\n'
    '      "NEW vs OLD 95% CI": "n/a",\n'
    '      "verdict": "SLOWER (REGRESSION)",\n'
    '      "reason": "single values, no interval: NEW/OLD = 1.1000 (+10.0%): NEW is worse; regression: NEW is worse by 10.0%, beyond 5.0%"\n'
    '    },\n'
    '    {\n'
    '      "case": "c2 / new",\n'
    '      "old": "2 (n=3)",\n'
    '      "new": "2 (n=3)",\n'
    '      "NEW/OLD": "1.0000",\n'
    '      "NEW vs OLD 95% CI": "[-11.3%, +11.3%]",\n'
    '      "verdict": "UNDECIDED",\n'
    '      "reason": "95% CI of NEW vs OLD is [-11.3%, +11.3%]: it includes 0 and reaches past the +/-1.0% band; more pairs may decide; no regression beyond 5.0% (NEW worse by at most 11.3%)"\n'
    '    }\n'
    '  ],\n'
    '  "only_old": [\n'
    '    "gone / new"\n'
    '  ],\n'
    '  "only_new": [\n'
    '    "added / new"\n'
    '  ],\n'
    '  "regressions": [\n'
    '    "c1 / new"\n'
    '  ]\n'
    '}'
)

PARITY_MD = (
    '| case | old | new | NEW/OLD | NEW vs OLD 95% CI | verdict | reason |\n'
    '|---|---|---|---|---|---|---|\n'
    '| a | PASS | FAIL |  |  | REGRESSION | PASS -> FAIL |\n'
    '| b | PASS | PASS |  |  | SAME | PASS |\n'
    ''
)

AB_MD = (
    '| case | old | new | NEW/OLD | NEW vs OLD 95% CI | verdict | reason |\n'
    '|---|---|---|---|---|---|---|\n'
    '| k / B | 510 ms (n=2) | 255 ms (n=2) | 0.5000 | [-63.6%, -36.4%] | FASTER | 95% CI of NEW vs OLD is [-63.6%, -36.4%], excluding 0: NEW is better (lower is better); no regression beyond 5.0% (NEW worse by at most 0.0%) |\n'
    ''
)


def test_bench_markdown_csv_json():
    assert render_compare(BENCH, "md") == BENCH_MD
    assert render_compare(BENCH, "csv") == BENCH_CSV
    assert render_compare(BENCH, "json") == BENCH_JSON


def test_parity_status_changes():
    assert render_compare(PARITY, "md") == PARITY_MD


def test_ab_values_in_their_unit():
    assert render_compare(AB, "md") == AB_MD
    assert shown((0.5, 0.52), "s") == "510 ms (n=2)" and shown((3.0,)) == "3" and shown("PASS") == "PASS"


def test_terminal_table_puts_reasons_below():
    buf = io.StringIO()
    assert render_compare(BENCH, "table", Console(file=buf, width=160, color_system=None)) is None
    lines = buf.getvalue().splitlines()
    assert lines[0].strip() == "compare bench (median_us)"
    assert lines[-4].startswith("c1 / new: single values, no interval: NEW/OLD = 1.1000 (+10.0%)")
    assert lines[-2:] == ["only in OLD: gone / new", "only in NEW: added / new"]
