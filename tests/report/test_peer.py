"""The peer table: the committed H200 mmvq bench file against docs/peer_llamacpp_h200.csv, exact rows."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli
from strata_bench.errors import InputError
from strata_bench.results.load import load
from strata_bench.report.peer import load_peer, peer_rows, read_target, render_peer, target

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "tests/data/results/bench-20261201T094112Z.json"  # an H200 run of an earlier tree
PEER = ROOT / "docs/peer_llamacpp_h200.csv"


@pytest.fixture(scope="module")
def rows():
    return peer_rows(load(BENCH).records, load_peer(PEER))


def test_targets_follow_issue_14():
    assert [target("iq2_xxs", 1), target("iq4_xs", 1), target("q8_0", 1), target("q2_0", 1)] == [2.0, 1.15, 1.15, None]
    assert [target("iq4_nl", 8), target("iq1_s", 8), target("q8_0", 8), target("iq2_s", 4)] == [2.5, 2.5, None, None]


def test_read_targets_follow_issue_37():
    assert [read_target(f, 1) for f in ("iq1_s", "iq3_s", "iq4_nl", "iq4_xs", "q8_0", "q2_0")] == \
        [0.60, 0.60, 0.60, 0.85, 0.85, 0.60]
    assert [read_target(f, 8) for f in ("iq1_m", "iq3_s", "iq4_xs", "q8_0", "q2_0")] == [0.40, 0.40, None, None, None]
    assert read_target("iq2_xxs", 4) is None


def test_csv_rows_are_exact(rows):
    lines = render_peer(rows, "csv").splitlines()
    assert lines[0] == ("shape,format,n,old us,old GB/s,new us,new GB/s,best,best %read,llama.cpp us,llama/best,"
                        "target,speed,read target,read")
    assert len(lines) == 1 + 11 * 3  # 11 formats x n = 1, 4, 8
    assert "131072x8192,iq1_s,1,281.1,748,133.7,1573,new,35.2,284.0,2.12,2x,met,60%,missed" in lines
    assert "131072x8192,iq4_xs,1,165.2,3457,221.1,2582,old,77.3,245.0,1.48,1.15x,met,85%,missed" in lines
    assert "131072x8192,iq3_s,8,2388.7,195,377.5,1234,new,27.6,746.0,1.98,2.5x,missed,40%,missed" in lines
    assert "131072x8192,q2_0,1,158.7,1906,119.2,2538,new,56.8,,,,,60%,missed" in lines  # no peer figure


def test_markdown_counts_the_targets(rows):
    md = render_peer(rows, "md")
    assert md.splitlines()[0].startswith("| shape ")
    assert "| 131072x8192 | iq4_nl   |   1 |    195.9 |" in md
    assert "Speed targets met: 4 of 19; read targets met: 2 of 18;" in md


def test_report_peer_command_and_bad_input(tmp_path):
    res = CliRunner().invoke(cli, ["report", "--peer", str(PEER), str(BENCH), "-o", "csv"])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[1] == "131072x8192,iq1_m,1,267.8,879,174.5,1350,new,30.2,309.0,1.77,2x,missed,60%,missed"
    bad = tmp_path / "peer.csv"
    bad.write_text("format,us\niq2_xxs,279\n")
    res = CliRunner().invoke(cli, ["report", "--peer", str(bad), str(BENCH)])
    assert res.exit_code == 2 and "missing ncols" in res.output
    bad.write_text("format,ncols,us\niq2_xxs,one,279\n")
    with pytest.raises(InputError, match="peer.csv:2: bad peer row"):
        load_peer(bad)
    parity = next((ROOT / "results").glob("*/parity-*.json"))  # any card's
    res = CliRunner().invoke(cli, ["report", "--peer", str(PEER), str(parity)])
    assert res.exit_code == 2 and "needs a bench results file" in res.output


def _record(variant, fmt="iq2_xxs", ncols=1, us=100.0, status="timed"):
    return {"family": "mmvq", "variant": variant, "format": fmt, "rows": 131072, "cols": 8192, "ncols": ncols,
            "median_us": us, "status": status}


def test_the_peer_can_be_the_files_own_ggml_rows_and_they_are_not_ours():
    from strata_bench.report.peer import own_records, peer_in_records

    records = [_record("old", us=180.0), _record("new", us=138.5), _record("ggml", us=283.44),
               _record("ggml", fmt="q4_k", us=260.6), _record("ggml", ncols=8, us=9.0, status="parity failed"),
               _record("ggml_b", us=1.0)]
    assert peer_in_records(records, "ggml") == {(131072, 8192, "iq2_xxs", 1): 283.4, (131072, 8192, "q4_k", 1): 260.6}
    assert [r["variant"] for r in own_records(records, {"ggml", "ggml_b"})] == ["old", "new"]
    with pytest.raises(InputError, match=r"^--peer ggml: the file has no timed mmvq rows of variant ggml$"):
        peer_in_records(records[:2], "ggml")


def test_the_foreign_variants_are_the_ones_the_file_declares():
    from strata_bench.report.peer import foreign_variants

    declared = {"run": {"argv": [], "extensions": {"Ggml": {"trees": {}, "foreign_variants": ["ggml", "ggml_b"]},
                                                   "TomlVariants": {"variants": ["v.toml"]}}}}
    assert foreign_variants(declared) == {"ggml", "ggml_b"}
    assert foreign_variants({}) == set()


def test_a_peer_that_is_neither_a_variant_nor_a_file_is_one_line(tmp_path):
    from click.testing import CliRunner

    from strata_bench.cli.main import cli

    bench = BENCH
    res = CliRunner().invoke(cli, ["report", "--peer", "nosuch", str(bench)])
    assert res.exit_code == 2
    assert res.stderr.splitlines() == [f"--peer nosuch: neither a variant of {bench.name} (new, old) nor a peer CSV "
                                       "file"]
