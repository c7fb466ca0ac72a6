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
    assert _render(path, "md").splitlines()[-1] == note
    assert _render(path, "table").splitlines()[-1] == note
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
