"""The fixture store: .npz + manifest round trip, deterministic bytes, sha256 and pickle refusal, and
verify (file hashes, re-dequantized values, untracked files, a changed source GGUF)."""
from __future__ import annotations

import json
import shutil
import zipfile

import numpy as np
import pytest

from strata_bench.data.gguf_import import fixture_from_gguf
from strata_bench.data.store import list_fixtures, load_fixture, read_manifest, save_fixture, sha256_file, verify_fixtures
from strata_bench.data.synthetic import make_synthetic
from strata_bench.errors import InputError
from strata_bench.kernels.sources import REPO_ROOT
from tests.zip_bomb import NAME, write_zip_bomb

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


def test_save_load_round_trip_with_manifest(tmp_path):
    fix = make_synthetic("iq3_s", 4, 512, seed=5, edge=True, activation_rows=2)
    path = save_fixture(fix, tmp_path)
    assert _files(tmp_path) == ["iq3_s-4x512-s5-edge.npz", "manifest.json"]
    entry = read_manifest(tmp_path)["fixtures"][fix.name]
    assert entry["sha256"] == sha256_file(path)
    assert entry["provenance"] == {"kind": "synthetic", "seed": 5, "generator": "strata_bench.data.synthetic.synthetic_weights",
                                   "edge": True, "activations": {"generator": "strata_bench.data.synthetic.seeded_activations",
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
    _rewrite_sha(tmp_path, name)


def test_pickled_objects_are_refused_even_with_a_matching_sha(tmp_path):
    fix = make_synthetic("q4_0", 2, 64, seed=1)
    save_fixture(fix, tmp_path)
    _rewrite_with_manifest_sha(tmp_path, fix.name, {"raw": np.array([{"evil": 1}], dtype=object),
                                                    "meta": np.array("{}")})
    with pytest.raises(InputError, match="pickled objects"):
        load_fixture(fix.name, tmp_path)


def test_an_array_header_declaring_more_than_the_file_holds_is_one_line(tmp_path):
    import io
    import zipfile

    fix = make_synthetic("q4_0", 2, 64, seed=1)
    save_fixture(fix, tmp_path)
    member = io.BytesIO()
    np.lib.format.write_array_header_1_0(member, {"descr": "<f8", "fortran_order": False, "shape": (10**15,)})
    path = tmp_path / f"{fix.name}.npz"
    with zipfile.ZipFile(path, "w") as archive:  # np.load allocated 7 PiB for it: a MemoryError
        archive.writestr("raw.npy", member.getvalue() + bytes(16))
    _rewrite_sha(tmp_path, fix.name)
    with pytest.raises(InputError) as err:
        load_fixture(fix.name, tmp_path)
    assert str(err.value) == (f"fixture {fix.name!r}: {path.name}: raw.npy declares 8000000000000000 bytes "
                              f"(shape [1000000000000000], float64) but holds {len(member.getvalue()) + 16} bytes")


def test_a_zip_bomb_is_refused_before_it_is_inflated(tmp_path):
    path = write_zip_bomb(tmp_path)  # 4.4 MB of zeros in 5 kB: np.load inflated it all
    inflated = sum(info.file_size for info in zipfile.ZipFile(path).infolist())
    with pytest.raises(InputError) as err:
        load_fixture(NAME, tmp_path)
    assert str(err.value) == (f"fixture {NAME!r}: {path.name}: its members declare {inflated} bytes uncompressed, "
                              f"more than the file's {path.stat().st_size} (a fixture's members are stored "
                              "uncompressed)")
    assert verify_fixtures(tmp_path) == [str(err.value)]


def _rewrite_sha(tmp_path, name):
    manifest = read_manifest(tmp_path)
    manifest["fixtures"][name]["sha256"] = sha256_file(tmp_path / f"{name}.npz")
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))


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


def _save_when_started(fix, root, start):
    start.wait()  # both imports read the manifest at the same moment
    save_fixture(fix, root)


def test_two_imports_into_one_root_at_once_lose_no_manifest_entry(tmp_path):
    """50 rounds of two processes saving a fixture each into one folder: both entries and files stay."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    fixes = [make_synthetic("q8_0", 2, 256, seed=s) for s in (1, 2)]
    for round_ in range(50):
        root = tmp_path / str(round_)
        start = ctx.Barrier(2)
        procs = [ctx.Process(target=_save_when_started, args=(fix, root, start)) for fix in fixes]
        for p in procs:
            p.start()
        for p in procs:
            p.join(30)
        assert [p.exitcode for p in procs] == [0, 0]
        assert sorted(read_manifest(root)["fixtures"]) == sorted(f.name for f in fixes)
        assert verify_fixtures(root) == []
        assert _files(root) == sorted([f"{f.name}.npz" for f in fixes] + ["manifest.json"])
