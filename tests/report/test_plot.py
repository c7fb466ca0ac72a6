"""`plot FILE`: a PNG of A/B runs; other kinds are refused."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from strata_bench.ab.arms import Arm, RunFailed
from strata_bench.ab.plan import make_plan
from strata_bench.ab.runner import run_ab
from strata_bench.ab.store import finish
from strata_bench.cli.main import cli
from strata_bench.results.store import ResultsWriter


def _values(values):
    it = iter(values)

    def run():
        value = next(it)
        if isinstance(value, str):
            raise RunFailed(value, {"output_tail": "last line\n"})
        return value

    return run


def _ab_file(tmp_path, a, b, name="case1", pairs=4, warmup=1):
    writer = ResultsWriter(tmp_path, "ab", {"devices": []})
    plan = make_plan("abba", pairs=pairs, warmup=warmup, seed=5, max_failures="50%")
    outcome = run_ab(Arm("A", _values(a), {"argv": ["prog"], "env": {}}),
                       Arm("B", _values(b), {"argv": ["prog"], "env": {"X": "1"}}), plan, writer, case=name)
    return finish(writer, [outcome]), writer.records_path, outcome


def _records_file(tmp_path, kind, records):
    writer = ResultsWriter(tmp_path, kind, {})
    for record in records:
        writer.append(record)
    return writer.finish({"n": len(records)}, 0)


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    summary, _, _ = _ab_file(tmp_path, [1.0, 1.0, 1.01, 0.99, 1.0], [1.1, "timed out", 1.12, 1.09, 1.1])
    out = tmp_path / "ab.png"
    res = CliRunner().invoke(cli, ["plot", str(summary), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    parity = _records_file(tmp_path / "p", "parity", [{"case": "c", "status": "PASS"}])
    res = CliRunner().invoke(cli, ["plot", str(parity)])
    assert res.exit_code == 2 and "plot draws A/B results" in res.output


def test_plot_one_panel_row_per_metric_with_pairs_joined(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import sys

    from strata_bench.ab.arms import Sample
    from strata_bench.report import plot as plot_mod

    def run(factor):
        return lambda: Sample(1.0 * factor, {}, {"prefill[128]": 1.0 * factor, "decode": 100 / factor})

    writer = ResultsWriter(tmp_path, "ab", {"devices": []})
    plan = make_plan("abba", pairs=3, warmup=0, seed=5)
    outcome = run_ab(Arm("A", run(1.0), {}), Arm("B", run(1.1), {}), plan, writer)
    summary = finish(writer, [outcome])
    drawn = []
    real = plot_mod.draw_runs
    monkeypatch.setattr(plot_mod, "draw_runs", lambda ax, view: (drawn.append((view.name, view.title)),
                                                                  real(ax, view)))
    out = plot_mod.plot_file(summary, tmp_path / "m.png")
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert drawn == [("prefill[128]", "command / prefill[128]: SLOWER (abba, 3 pairs)"),
                     ("decode", "command / decode: FASTER (abba, 3 pairs)")]  # lower is better here
    assert sys.modules["matplotlib"].get_backend().lower() == "agg"
