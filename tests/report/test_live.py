"""The parity markdown and table on hand-built results (the real CaseResult and CheckResult types),
exactly, on one device and on several (a device column, counts per device, failures naming their device)."""
from __future__ import annotations

import dataclasses
import io
from collections import namedtuple

from rich.console import Console

from strata_bench.checks.parity import CaseResult, CheckResult, CaseStatus
from strata_bench.report.live import DeviceCounts, device_counts, parity_markdown, print_parity_table

# parity_markdown reads only a case's name and variants.
Case = namedtuple("Case", "name variants")

PASSED = CaseResult(Case("mmvq/iq2_xxs/64x512/n1/seed:1", ("old", "new")), 0, CaseStatus.PASS,
                    (CheckResult("written", "old", True), CheckResult("bitwise", "new", True),
                     CheckResult("f64", "old", True, max_err=2e-6, max_ref=4.0),
                     CheckResult("f64", "new", True, max_err=3e-6, max_ref=4.0)), 0.1)
FAILED = CaseResult(Case("mmvq/q8_0/64x256/n8/seed:1", ("old", "new")), 0, CaseStatus.FAIL,
                    (CheckResult("written", "old", True),
                     CheckResult("bitwise", "new", False, "3 of 512 outputs differ; first at row 7"),
                     CheckResult("columns", "new", True)), 0.2)
FAULTED = CaseResult(Case("grouped/iq3_s/64x512/n2/seed:1", ("old",)), 0, CaseStatus.FAULT, (), 0.0,
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
    '- `mmvq/q8_0/64x256/n8/seed:1` on device 0: 3 of 512 outputs differ; first at row 7\n'
    '- `grouped/iq3_s/64x512/n2/seed:1` on device 0: CUDA_ERROR_ILLEGAL_ADDRESS in old'
)


def test_parity_markdown_rows_and_failures():
    assert parity_markdown([PASSED, FAILED, FAULTED]) == EXPECTED


def test_all_passing_has_no_failures_section():
    assert parity_markdown([PASSED]) == "\n".join(EXPECTED.splitlines()[:3])


def on(result, device):
    return dataclasses.replace(result, device=device)


# The q8_0 case passing (on device 0, where device 1 fails it).
Q8_PASSED = dataclasses.replace(PASSED, case=FAILED.case)
# Device 0 passes both cases; device 1 fails the first and faults on the second; device 2 faults on its
# first case, so its second is not run.
SEVERAL = [on(PASSED, 0), on(Q8_PASSED, 0), on(FAILED, 1), on(FAULTED, 1), on(FAULTED, 2)]
NAMES = {0: "NVIDIA H200", 1: "NVIDIA H200", 2: "Tesla V100-SXM2-16GB"}


def test_counts_per_device():
    counts = device_counts(SEVERAL, [0, 1, 2], NAMES, selected=2)
    assert counts == [DeviceCounts(0, "NVIDIA H200", 2, 0, 0, 0), DeviceCounts(1, "NVIDIA H200", 2, 2, 1, 0),
                      DeviceCounts(2, "Tesla V100-SXM2-16GB", 1, 1, 1, 1)]
    assert [c.text() for c in counts] == [
        "device 0 (NVIDIA H200): 2 cases, 0 failures",
        "device 1 (NVIDIA H200): 2 cases, 2 failures (1 fault)",
        "device 2 (Tesla V100-SXM2-16GB): 1 case, 1 failure (1 fault), 1 not run"]
    assert counts[2].to_record() == {"device": 2, "name": "Tesla V100-SXM2-16GB", "cases": 1, "failures": 1,
                                     "faults": 1, "not_run": 1}
    # A device that ran nothing (an interrupted run) is still listed, with its cases not run.
    assert device_counts(SEVERAL[:1], [0, 1], NAMES, selected=2)[1] == DeviceCounts(1, "NVIDIA H200", 0, 0, 0, 2)


def test_markdown_on_several_devices_has_a_device_column_and_counts():
    counts = device_counts(SEVERAL, [0, 1, 2], NAMES, selected=2)
    assert parity_markdown(SEVERAL, counts) == (
        '| case | device | variants | checks | max\\|err\\|/max\\|ref\\| | verdict |\n'
        '|---|---|---|---|---|---|\n'
        '| `mmvq/iq2_xxs/64x512/n1/seed:1` | 0 | old vs new | written bitwise f64 | 7.50e-07 | PASS |\n'
        '| `mmvq/q8_0/64x256/n8/seed:1` | 0 | old vs new | written bitwise f64 | 7.50e-07 | PASS |\n'
        '| `mmvq/q8_0/64x256/n8/seed:1` | 1 | old vs new | written BITWISE columns | - | FAIL |\n'
        '| `grouped/iq3_s/64x512/n2/seed:1` | 1 | old | CUDA_ERROR_ILLEGAL_ADDRESS in old | - | FAULT |\n'
        '| `grouped/iq3_s/64x512/n2/seed:1` | 2 | old | CUDA_ERROR_ILLEGAL_ADDRESS in old | - | FAULT |\n'
        '\n'
        '| device | name | cases | failures | faults | not run |\n'
        '|---|---|---|---|---|---|\n'
        '| 0 | NVIDIA H200 | 2 | 0 | 0 | 0 |\n'
        '| 1 | NVIDIA H200 | 2 | 2 | 1 | 0 |\n'
        '| 2 | Tesla V100-SXM2-16GB | 1 | 1 | 1 | 1 |\n'
        '\n'
        'Failures:\n'
        '\n'
        '- `mmvq/q8_0/64x256/n8/seed:1` on device 1: 3 of 512 outputs differ; first at row 7\n'
        '- `grouped/iq3_s/64x512/n2/seed:1` on device 1: CUDA_ERROR_ILLEGAL_ADDRESS in old\n'
        '- `grouped/iq3_s/64x512/n2/seed:1` on device 2: CUDA_ERROR_ILLEGAL_ADDRESS in old')


def test_markdown_on_one_device_with_counts_keeps_the_table_and_adds_the_device():
    counts = device_counts([PASSED], [0], NAMES, selected=1)
    assert parity_markdown([PASSED], counts) == "\n".join(EXPECTED.splitlines()[:3] + [
        "", "| device | name | cases | failures | faults | not run |", "|---|---|---|---|---|---|",
        "| 0 | NVIDIA H200 | 1 | 0 | 0 | 0 |"])


def _table_text(results) -> str:
    console = Console(width=200, record=True, file=io.StringIO(), color_system=None)
    print_parity_table(results, console)
    return console.export_text()


def test_terminal_table_shows_the_device_only_when_there_are_several():
    one, several = _table_text([PASSED, FAILED]), _table_text(SEVERAL)

    def header(text):
        line = next(line for line in text.splitlines() if "case" in line and "verdict" in line)
        return [cell.strip() for cell in line.split("┃")[1:-1]]

    assert header(one) == ["case", "variants", "checks", "max|err|/max|ref|", "verdict"]
    assert header(several) == ["case", "device", "variants", "checks", "max|err|/max|ref|", "verdict"]
    assert one.splitlines()[-1] == "FAIL mmvq/q8_0/64x256/n8/seed:1 on device 0: 3 of 512 outputs differ; first at row 7"
    assert several.splitlines()[-3:] == [
        "FAIL mmvq/q8_0/64x256/n8/seed:1 on device 1: 3 of 512 outputs differ; first at row 7",
        "FAULT grouped/iq3_s/64x512/n2/seed:1 on device 1: CUDA_ERROR_ILLEGAL_ADDRESS in old",
        "FAULT grouped/iq3_s/64x512/n2/seed:1 on device 2: CUDA_ERROR_ILLEGAL_ADDRESS in old"]


def test_each_failure_gives_the_command_that_reruns_it():
    def rerun(r):
        return f"strata-bench parity -k '^{r.case.name}[x]$'"  # brackets stay text, not rich markup

    md = parity_markdown([PASSED, FAILED], rerun=rerun)
    assert md.splitlines()[-2:] == ["- `mmvq/q8_0/64x256/n8/seed:1` on device 0: 3 of 512 outputs differ; first at row 7",
                                    "  rerun: `strata-bench parity -k '^mmvq/q8_0/64x256/n8/seed:1[x]$'`"]
    out = io.StringIO()
    print_parity_table([PASSED, FAILED], Console(file=out, width=200), rerun=rerun)
    assert out.getvalue().splitlines()[-2:] == [
        "FAIL mmvq/q8_0/64x256/n8/seed:1 on device 0: 3 of 512 outputs differ; first at row 7",
        "  rerun: strata-bench parity -k '^mmvq/q8_0/64x256/n8/seed:1[x]$'"]


# A variant judged by its error model: its max|err| and ratio to the baseline's in a column of their own.
MODELLED = CaseResult(Case("mmvq/iq2_xxs/64x512/n1/seed:1", ("old", "new", "ggml")), 0, CaseStatus.PASS,
                      (CheckResult("bitwise", "ggml", True, "y: not bitwise equal to old (judged by its error model)"),
                       CheckResult("f64", "old", True, max_err=2e-6, max_ref=4.0, label="a"),
                       CheckResult("err-model", "ggml", True, max_err=8.4e-6, max_ref=4.0, tol=8e-5, label="a",
                                   baseline_ratio=4.2),
                       CheckResult("f64", "old", True, max_err=0.0, max_ref=4.0, label="b"),
                       CheckResult("err-model", "ggml", True, max_err=1e-6, max_ref=4.0, tol=0.1, label="b",
                                   baseline_ratio=float("inf"))), 0.1)


def test_error_model_column_in_markdown_and_table():
    assert parity_markdown([PASSED, MODELLED]) == (
        '| case | variants | checks | max\\|err\\|/max\\|ref\\| | max\\|err\\| vs baseline | verdict |\n'
        '|---|---|---|---|---|---|\n'
        '| `mmvq/iq2_xxs/64x512/n1/seed:1` | old vs new | written bitwise f64 | 7.50e-07 | - | PASS |\n'
        '| `mmvq/iq2_xxs/64x512/n1/seed:1` | old vs new vs ggml | bitwise f64 err-model | 2.10e-06 | '
        'ggml 1.00e-06 = inf x old | PASS |')
    out = io.StringIO()
    print_parity_table([MODELLED], Console(file=out, width=200))
    assert "max|err| vs baseline" in out.getvalue() and "ggml 1.00e-06 = inf x old" in out.getvalue()


def test_a_piped_console_takes_the_width_columns_asks_for(monkeypatch):
    from strata_bench.report.live import PIPED_WIDTH, stdout_console

    monkeypatch.setenv("COLUMNS", "80")
    assert stdout_console().width == 80  # pytest captures stdout: not a terminal
    monkeypatch.delenv("COLUMNS")
    assert stdout_console().width == PIPED_WIDTH
    monkeypatch.setenv("COLUMNS", "wide")
    assert stdout_console().width == PIPED_WIDTH
