"""`compare` output on hand-built comparisons: markdown, CSV and JSON, exactly, with the summary
(counts, geometric mean, the Benjamini-Hochberg step, conditions)."""
from __future__ import annotations

import io
import json

from rich.console import Console

from strata_bench.report.compare import render_compare, shown
from strata_bench.results.compare import CaseDelta, FileComparison, judge
from strata_bench.results.guard import Difference
from strata_bench.stats.criteria import Criteria
from strata_bench.stats.intervals import Interval
from strata_bench.stats.ratio import RatioEstimate, geometric_mean, sample_ratio

CRITERIA = Criteria(fail_on_regression=0.05)
# c1: one value a side (the bare ratio, outside BH); c2: SAME; c3: SLOWER, a discovery; c4: its interval
# excludes no change, but its q after BH over 3 cases is above 5%: UNDECIDED.
SINGLE = judge(sample_ratio([10.0], [11.0]), None, CRITERIA)
SAME = judge(RatioEstimate(10, 10, 1.001, Interval(0.996, 1.006, "m"), 0.6), 0.6, CRITERIA, 3)
SLOWER = judge(RatioEstimate(10, 10, 1.08, Interval(1.06, 1.10, "m"), 1e-9), 3e-9, CRITERIA, 3)
DEMOTED = judge(RatioEstimate(10, 10, 1.04, Interval(1.005, 1.075, "m"), 0.03), 0.09, CRITERIA, 3)
BENCH = FileComparison(
    "bench", "median_us",
    (CaseDelta(("c1", "new"), (10.0,), (11.0,), SINGLE, regression=SINGLE.regression),
     CaseDelta(("c2", "new"), (2.0, 2.1, 1.9), (2.0, 2.1, 1.9), SAME),
     CaseDelta(("c3", "new"), (5.0, 5.0), (5.4, 5.4), SLOWER, regression=SLOWER.regression),
     CaseDelta(("c4", "new"), (3.0, 3.1), (3.1, 3.2), DEMOTED)),
    ("gone / new",), ("added / new",), criteria=CRITERIA, geomean=geometric_mean([1.1, 1.001, 1.08, 1.04]),
    differences=(Difference("driver", "580.159.04", "570.86.15"),), unchecked=("clocks policy (not in NEW)",))

PARITY = FileComparison("parity", "status", (CaseDelta(("a",), "PASS", "FAIL", None, "PASS -> FAIL", True),
                                             CaseDelta(("b",), "PASS", "PASS", None, "PASS")), (), ())
AB_EST = sample_ratio([0.5, 0.52], [0.25, 0.26])
AB = FileComparison("ab", "value", (CaseDelta(("k", "B"), (0.5, 0.52), (0.25, 0.26), judge(AB_EST, AB_EST.p, CRITERIA)),),
                    (), (), unit="s", criteria=CRITERIA, geomean=geometric_mean([AB_EST.ratio]))

BENCH_MD = (
    '| case | old | new | NEW/OLD | NEW vs OLD 95% CI | p | q (BH) | verdict | reason |\n'
    '|---|---|---|---|---|---|---|---|---|\n'
    '| c1 / new | 10 | 11 | 1.1000 | n/a |  |  | SLOWER (REGRESSION) | single values, no interval: NEW/OLD = 1.1000 (+10.0%): NEW is worse; regression: NEW is worse by 10.0%, beyond 5.0% |\n'
    '| c2 / new | 2 (n=3) | 2 (n=3) | 1.0010 | [-0.40%, +0.60%] | 0.6 | 0.6 | SAME | interval inside the +/-1.0% threshold; no regression beyond 5.0% (NEW worse by at most 0.6%) |\n'
    '| c3 / new | 5 (n=2) | 5.4 (n=2) | 1.0800 | [+6.00%, +10.00%] | 1e-09 | 3e-09 | SLOWER (REGRESSION) | NEW is worse (lower is better), beyond the +/-1.0% threshold; regression: NEW is worse by at least 6.0%, beyond 5.0% |\n'
    '| c4 / new | 3.05 (n=2) | 3.15 (n=2) | 1.0400 | [+0.50%, +7.50%] | 0.03 | 0.09 | UNDECIDED | a change alone (p=0.03), not after Benjamini-Hochberg over 3 cases (q=0.09 > 0.05); no regression beyond 5.0% (NEW worse by at most 7.5%) |\n'
    '\n'
    '- 4 cases: 0 FASTER, 2 SLOWER, 1 SAME, 1 UNDECIDED\n'
    "- geometric mean of NEW/OLD over 4 cases: 1.0546, 95% CI [0.9866, 1.1272] (t over the cases' log ratios: their spread, not one case's noise)\n"
    '- threshold +/-1.0%; Benjamini-Hochberg over 3 cases at a 5% false discovery rate; 1 with a single value a side, judged by the bare ratio, outside that step\n'
    '- compared despite different conditions (--allow-different): driver (OLD 580.159.04, NEW 570.86.15)\n'
    '- conditions not checked: clocks policy (not in NEW)\n'
    '- only in OLD: gone / new\n'
    '- only in NEW: added / new\n'
)

BENCH_CSV = (
    'case,old,new,NEW/OLD,NEW vs OLD 95% CI,p,q (BH),verdict,reason\n'
    'c1 / new,10,11,1.1000,n/a,,,SLOWER (REGRESSION),"single values, no interval: NEW/OLD = 1.1000 (+10.0%): NEW is worse; regression: NEW is worse by 10.0%, beyond 5.0%"\n'
    'c2 / new,2 (n=3),2 (n=3),1.0010,"[-0.40%, +0.60%]",0.6,0.6,SAME,interval inside the +/-1.0% threshold; no regression beyond 5.0% (NEW worse by at most 0.6%)\n'
    'c3 / new,5 (n=2),5.4 (n=2),1.0800,"[+6.00%, +10.00%]",1e-09,3e-09,SLOWER (REGRESSION),"NEW is worse (lower is better), beyond the +/-1.0% threshold; regression: NEW is worse by at least 6.0%, beyond 5.0%"\n'
    'c4 / new,3.05 (n=2),3.15 (n=2),1.0400,"[+0.50%, +7.50%]",0.03,0.09,UNDECIDED,"a change alone (p=0.03), not after Benjamini-Hochberg over 3 cases (q=0.09 > 0.05); no regression beyond 5.0% (NEW worse by at most 7.5%)"\n'
)

PARITY_MD = (
    '| case | old | new | NEW/OLD | NEW vs OLD 95% CI | p | q (BH) | verdict | reason |\n'
    '|---|---|---|---|---|---|---|---|---|\n'
    '| a | PASS | FAIL |  |  |  |  | REGRESSION | PASS -> FAIL |\n'
    '| b | PASS | PASS |  |  |  |  | SAME | PASS |\n'
    '\n'
    '- 2 cases: 1 SAME, 0 CHANGED, 1 REGRESSION\n'
)

BENCH_JSON = {'kind': 'bench',
 'value': 'median_us',
 'cases': [{'case': 'c1 / new',
            'old': '10',
            'new': '11',
            'NEW/OLD': '1.1000',
            'NEW vs OLD 95% CI': 'n/a',
            'p': '',
            'q (BH)': '',
            'verdict': 'SLOWER (REGRESSION)',
            'reason': 'single values, no interval: NEW/OLD = 1.1000 (+10.0%): NEW is worse; regression: NEW '
                      'is worse by 10.0%, beyond 5.0%',
            'ratio': 1.1,
            'ci': None,
            'ci_method': None,
            'p_value': None,
            'q_value': None,
            'n_old': 1,
            'n_new': 1},
           {'case': 'c2 / new',
            'old': '2 (n=3)',
            'new': '2 (n=3)',
            'NEW/OLD': '1.0010',
            'NEW vs OLD 95% CI': '[-0.40%, +0.60%]',
            'p': '0.6',
            'q (BH)': '0.6',
            'verdict': 'SAME',
            'reason': 'interval inside the +/-1.0% threshold; no regression beyond 5.0% (NEW worse by at '
                      'most 0.6%)',
            'ratio': 1.001,
            'ci': [0.996, 1.006],
            'ci_method': 'm',
            'p_value': 0.6,
            'q_value': 0.6,
            'n_old': 10,
            'n_new': 10},
           {'case': 'c3 / new',
            'old': '5 (n=2)',
            'new': '5.4 (n=2)',
            'NEW/OLD': '1.0800',
            'NEW vs OLD 95% CI': '[+6.00%, +10.00%]',
            'p': '1e-09',
            'q (BH)': '3e-09',
            'verdict': 'SLOWER (REGRESSION)',
            'reason': 'NEW is worse (lower is better), beyond the +/-1.0% threshold; regression: NEW is '
                      'worse by at least 6.0%, beyond 5.0%',
            'ratio': 1.08,
            'ci': [1.06, 1.1],
            'ci_method': 'm',
            'p_value': 1e-09,
            'q_value': 3e-09,
            'n_old': 10,
            'n_new': 10},
           {'case': 'c4 / new',
            'old': '3.05 (n=2)',
            'new': '3.15 (n=2)',
            'NEW/OLD': '1.0400',
            'NEW vs OLD 95% CI': '[+0.50%, +7.50%]',
            'p': '0.03',
            'q (BH)': '0.09',
            'verdict': 'UNDECIDED',
            'reason': 'a change alone (p=0.03), not after Benjamini-Hochberg over 3 cases (q=0.09 > 0.05); '
                      'no regression beyond 5.0% (NEW worse by at most 7.5%)',
            'ratio': 1.04,
            'ci': [1.005, 1.075],
            'ci_method': 'm',
            'p_value': 0.03,
            'q_value': 0.09,
            'n_old': 10,
            'n_new': 10}],
 'counts': {'FASTER': 0, 'SLOWER': 2, 'SAME': 1, 'UNDECIDED': 1},
 'geometric_mean': {'value': 1.0545591988346548, 'n': 4, 'ci': [0.9865962552650067, 1.1272038566050226]},
 'threshold': 0.01,
 'false_discovery_rate': 0.05,
 'differences': [{'what': 'driver', 'old': '580.159.04', 'new': '570.86.15'}],
 'unchecked': ['clocks policy (not in NEW)'],
 'only_old': ['gone / new'],
 'only_new': ['added / new'],
 'regressions': ['c1 / new', 'c3 / new']}

AB_MD = (
    '| case | old | new | NEW/OLD | NEW vs OLD 95% CI | p | q (BH) | verdict | reason |\n'
    '|---|---|---|---|---|---|---|---|---|\n'
    '| k / B | 510 ms (n=2) | 255 ms (n=2) | 0.5000 | [-55.62%, -43.66%] | 0.0016 | 0.0016 | FASTER | NEW is better (lower is better), beyond the +/-1.0% threshold; no regression beyond 5.0% (NEW worse by at most 0.0%) |\n'
    '\n'
    '- 1 case: 1 FASTER, 0 SLOWER, 0 SAME, 0 UNDECIDED\n'
    '- geometric mean of NEW/OLD over 1 case: 0.5000\n'
    '- threshold +/-1.0%; Benjamini-Hochberg over 1 case at a 5% false discovery rate\n'
)


def test_bench_markdown_csv_json():
    assert render_compare(BENCH, "md") == BENCH_MD
    assert render_compare(BENCH, "csv") == BENCH_CSV
    assert json.loads(render_compare(BENCH, "json")) == BENCH_JSON


def test_parity_status_changes():
    assert render_compare(PARITY, "md") == PARITY_MD


def test_ab_values_in_their_unit():
    assert render_compare(AB, "md") == AB_MD
    assert shown((0.5, 0.52), "s") == "510 ms (n=2)" and shown((3.0,)) == "3" and shown("PASS") == "PASS"


def test_terminal_table_puts_reasons_and_summary_below():
    buf = io.StringIO()
    assert render_compare(BENCH, "table", Console(file=buf, width=200, color_system=None)) is None
    lines = buf.getvalue().splitlines()
    assert lines[0].strip() == "compare bench (median_us)"
    assert lines[-11].startswith("c1 / new: single values, no interval: NEW/OLD = 1.1000 (+10.0%)")
    assert lines[-7:] == [line[2:] for line in BENCH_MD.splitlines()[-7:]] and lines[-7] == "4 cases: 0 FASTER, 2 SLOWER, 1 SAME, 1 UNDECIDED"
