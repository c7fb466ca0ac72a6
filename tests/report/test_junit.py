"""report/junit.py: bench records as JUnit test cases (a rejected or faulted timing fails, with its status as the
message), the document read back by junitparser, and the step summary only where GitHub sets its file."""
from __future__ import annotations

from junitparser import Failure, JUnitXml

from strata_bench.report.junit import append_step_summary, bench_cases, junit_xml, write_junit

RECORDS = [{"case": "mmvq/iq2_xs/4096x14336/n1/seed:1", "variant": "old", "status": "timed", "median_us": 20.5},
           {"case": "mmvq/iq2_xs/4096x14336/n1/seed:1", "variant": "new", "status": "impossible: 1.0 us < 3.1 us",
            "median_us": 1.0},
           {"case": "mmvq/q8_0/1x32/n1/seed:1", "variant": "new", "status": "parity failed: y differs",
            "median_us": None}]


def test_bench_records_fail_where_their_figures_are_not_results():
    cases = bench_cases(RECORDS)
    assert [(c.classname, c.name, c.seconds, c.failure) for c in cases] == [
        ("mmvq/iq2_xs/4096x14336/n1/seed:1", "old", 20.5e-6, None),
        ("mmvq/iq2_xs/4096x14336/n1/seed:1", "new", 1.0e-6, "impossible: 1.0 us < 3.1 us"),
        ("mmvq/q8_0/1x32/n1/seed:1", "new", 0.0, "parity failed: y differs")]


def test_the_document_reads_back(tmp_path):
    path = tmp_path / "bench.xml"
    write_junit(path, "strata-bench bench", bench_cases(RECORDS))
    (suite,) = JUnitXml.fromfile(str(path))
    assert (suite.name, suite.tests, suite.failures, suite.errors) == ("strata-bench bench", 3, 2, 0)
    messages = [r.message for c in suite for r in c.result if isinstance(r, Failure)]
    assert messages == ["impossible: 1.0 us < 3.1 us", "parity failed: y differs"]
    assert junit_xml("s", []).startswith(b"<?xml version='1.0' encoding='utf-8'?>\n<testsuites tests=\"0\"")


def test_the_step_summary_is_appended_only_where_set(tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert append_step_summary("# x") is None
    target = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    append_step_summary("# one")
    append_step_summary("# two\n")
    assert target.read_text() == "# one\n\n# two\n\n"
