"""`report FILE` over results files written by ResultsWriter: A/B, parity, unknown kinds."""
from __future__ import annotations

import csv
import io
import json

from click.testing import CliRunner

from strata_bench.cli.main import cli
from strata_bench.report.render import render_file


def text_of(render, *args, **kwargs) -> str:
    """What a renderer returns, or else what it printed on a plain 160-column console."""
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, width=160, color_system=None)
    text = render(*args, console=console, **kwargs)
    return text if text is not None else buf.getvalue()





def _render(path, fmt):
    return text_of(render_file, path, fmt)


def test_ab_summary_and_records_render_the_same_verdict(tmp_path, ab_file):
    summary, records, live = ab_file(tmp_path, [1.0, 1.0, 1.01, 0.99, 1.0], [1.1, 1.1, "exit code 1", 1.09, 1.1])
    for path in (summary, records):
        body = json.loads(_render(path, "json"))
        assert body["cases"][0]["verdict"] == live.comparison.verdict.value == "SLOWER"
        assert body["cases"][0]["failures"][0]["reason"] == "exit code 1"
    table = _render(summary, "table")
    assert "verdict" in table and "X=1 prog" in table
    assert "exit code 1 | last line" in table
    md = _render(summary, "md")
    assert md.startswith("**Commands**\n\n- A: `prog`\n- B: `X=1 prog`\n\n**A/B: `case1`**")
    assert "| **ratio B/A [95% CI]** |" in md


def test_ab_csv_is_one_row_per_run(tmp_path, ab_file):
    summary, _, live = ab_file(tmp_path, [1.0] * 5, [2.0] * 5)
    rows = list(csv.DictReader(io.StringIO(_render(summary, "csv"))))
    assert len(rows) == len(live.runs) == 10
    assert list(rows[0])[:6] == ["case", "run_index", "pair", "position", "arm", "warmup"]
    assert rows[0]["arm"] == "B" and rows[0]["warmup"] == "True"


def test_parity_view_picks_its_columns(tmp_path, records_file):
    recs = [{"case": "mmvq/q8_0/64x256/n1/seed:1", "status": "PASS", "worst_ratio": 1e-7, "device": 0,
             "seconds": 0.1, "error": "", "checks": [{"check": "bitwise", "ok": True}]},
            {"case": "mmvq/q8_0/64x256/n8/seed:1", "status": "FAIL", "worst_ratio": 0.5, "device": 0,
             "seconds": 0.1, "error": "bitwise: 3 differ", "checks": []}]
    path = records_file(tmp_path, "parity", recs)
    md = _render(path, "md").splitlines()
    assert md[0] == "| case | status | worst_ratio | device | seconds | error |"
    assert "FAIL" in md[3] and "checks" not in md[0]


def test_a_parity_files_notes_end_every_view_but_the_data_ones(tmp_path):
    from strata_bench.results.store import ResultsWriter

    writer = ResultsWriter(tmp_path, "parity", {})
    writer.append({"case": "dequant/q4_0/9x32/n1/seed:1", "status": "PASS", "device": 0, "checks": []})
    path = writer.finish({"n": 1, "notes": ["the sign of a zero is not compared"]}, 0)
    note = "note: the sign of a zero is not compared"
    assert _render(path, "md").splitlines()[-3:] == [note, "", "1 row: 1 PASS"]
    assert _render(path, "table").splitlines()[-2:] == [note, "1 row: 1 PASS"]
    assert note not in _render(path, "csv") and note not in _render(path, "json")


def test_unknown_kind_renders_generic_columns(tmp_path, records_file):
    path = records_file(tmp_path, "sweep", [{"name": "x", "nested": {"a": 1}, "tags": [1, 2]}])
    body = json.loads(_render(path, "json"))
    assert body == [{"name": "x", "nested.a": 1, "tags": "1, 2"}]
    assert "sweep" in _render(path, "table")


def test_report_cli(tmp_path, ab_file):
    summary, _, _ = ab_file(tmp_path, [1.0] * 5, [1.0] * 5)
    res = CliRunner().invoke(cli, ["report", str(summary), "-o", "md"])
    assert res.exit_code == 0 and "SAME" in res.stdout
    res = CliRunner().invoke(cli, ["report", str(tmp_path / "nope.json")])
    assert res.exit_code == 2


def _bench_records(n=3):
    return [{"case": f"mmvq/iq2_xxs/131072x8192/n{i}/seed:1", "variant": "new", "ncols": i, "median_us": 138.4257,
             "min_us": 137.9, "max_us": 139.2, "ci_rel": 0.00391951, "gbps": 2004.12, "bound": "read",
             "frac_bound": 0.44871, "tflops": 0.0, "trials": 10, "copies": 2, "status": "timed"}
            for i in range(1, n + 1)]


def test_a_bench_report_fits_80_columns_with_short_names_and_a_count_line(tmp_path, records_file):
    from rich.console import Console

    recs = _bench_records()
    recs[2]["status"] = "impossible: " + "x" * 300  # a rejected row's long reason
    path = records_file(tmp_path, "bench", recs)
    buf = io.StringIO()
    render_file(path, "table", Console(file=buf, width=80, color_system=None))
    lines = buf.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    header = next(line for line in lines if "median us" in line)
    assert [h.strip() for h in header.strip("┃ ").split("┃")] == ["case", "variant", "n", "median us", "GB/s",
                                                                "of bound", "status"]
    assert "138.4" in buf.getvalue() and "0.00391951" not in buf.getvalue() and "x" * 60 not in buf.getvalue()
    assert "left out at 80 columns: min_us, max_us, ci_rel, bound, tflops, trials, copies" in " ".join(lines)
    assert lines[-1] == "3 rows: 2 timed, 1 impossible"


def test_markdown_and_csv_keep_every_figure_and_the_markdown_ends_with_its_count(tmp_path, records_file):
    path = records_file(tmp_path, "bench", _bench_records(2))
    md = _render(path, "md").splitlines()
    assert md[-1] == "2 rows: 2 timed" and "0.00391951" in md[2]
    assert "rows:" not in _render(path, "csv") and "0.00391951" in _render(path, "csv")


def test_a_reader_that_closes_the_pipe_ends_the_report_quietly(tmp_path, records_file):
    import subprocess
    import sys

    path = records_file(tmp_path, "bench", _bench_records(400))
    report = subprocess.Popen([sys.executable, "-m", "strata_bench", "report", str(path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    report.stdout.readline()
    report.stdout.close()  # as `| head -1` does
    _, err = report.communicate(timeout=120)
    assert (report.returncode, err) == (141, b"")
