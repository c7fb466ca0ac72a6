"""The parity markdown on hand-built results (the real CaseResult and CheckResult types), exactly."""
from __future__ import annotations

from collections import namedtuple

from strata_bench.checks.parity import CaseResult, CheckResult, Status
from strata_bench.report.live import parity_markdown

# parity_markdown reads only a case's name and variants.
Case = namedtuple("Case", "name variants")

PASSED = CaseResult(Case("mmvq/iq2_xxs/64x512/n1/seed:1", ("old", "new")), 0, Status.PASS,
                    (CheckResult("written", "old", True), CheckResult("bitwise", "new", True),
                     CheckResult("f64", "old", True, max_err=2e-6, max_ref=4.0),
                     CheckResult("f64", "new", True, max_err=3e-6, max_ref=4.0)), 0.1)
FAILED = CaseResult(Case("mmvq/q8_0/64x256/n8/seed:1", ("old", "new")), 0, Status.FAIL,
                    (CheckResult("written", "old", True),
                     CheckResult("bitwise", "new", False, "3 of 512 outputs differ; first at row 7"),
                     CheckResult("columns", "new", True)), 0.2)
FAULTED = CaseResult(Case("grouped/iq3_s/64x512/n2/seed:1", ("old",)), 0, Status.FAULT, (), 0.0,
                     "CUDA_ERROR_ILLEGAL_ADDRESS in old")

# The worst ratio is 3e-6 / 4.0 = 7.5e-7; a failed check kind is in capitals; a fault has no checks,
# so its error stands in the checks column.
EXPECTED = (
    '| case | variants | checks | max\\|err\\|/max\\|ref\\| | verdict |\n'
    '|---|---|---|---|---|\n'
    '| `mmvq/iq2_xxs/64x512/n1/seed:1` | old vs new | written bitwise f64 | 7.50e-07 | PASS |\n'
    '| `mmvq/q8_0/64x256/n8/seed:1` | old vs new | written BITWISE columns | - | FAIL |\n'
    '| `grouped/iq3_s/64x512/n2/seed:1` | old | CUDA_ERROR_ILLEGAL_ADDRESS in old | - | FAULT |\n'
    '\n'
    'Failures:\n'
    '\n'
    '- `mmvq/q8_0/64x256/n8/seed:1`: 3 of 512 outputs differ; first at row 7\n'
    '- `grouped/iq3_s/64x512/n2/seed:1`: CUDA_ERROR_ILLEGAL_ADDRESS in old'
)


def test_parity_markdown_rows_and_failures():
    assert parity_markdown([PASSED, FAILED, FAULTED]) == EXPECTED


def test_all_passing_has_no_failures_section():
    assert parity_markdown([PASSED]) == "\n".join(EXPECTED.splitlines()[:3])
