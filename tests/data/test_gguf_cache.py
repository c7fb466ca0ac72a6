"""--gguf rows (data/gguf_cache.py): only the asked rows are read (memory-mapped), cached by the file's
sha256, tensor and rows with provenance, found by name when a case runs; bad input writes nothing."""
from __future__ import annotations

import json

import numpy as np
import pytest

from strata_bench.data import gguf_cache
from strata_bench.data.gguf_layout import GgufLayout, read_layout
from strata_bench.data.store import load_fixture, sha256_file
from strata_bench.errors import InputError
from strata_bench.kernels.sources import REPO_ROOT

OTHER = REPO_ROOT / "tests" / "data" / "gguf" / "other-rows.gguf"
OTHER_SHA = "98ce7b4927f13315a0b8c43c009684cd950bff4fe3f9321e1a407b7cfe260515"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "gguf-fixtures"


def _files(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) if root.exists() else []


def test_the_other_file_is_the_generator_output(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_other_rows", OTHER.parent / "make_other_rows.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert sha256_file(OTHER) == OTHER_SHA
    assert sha256_file(module.write(tmp_path / "again.gguf")) == OTHER_SHA


def test_rows_are_read_through_a_memory_map_only(cache, monkeypatch):
    layout = read_layout(OTHER)
    tensor = next(t for t in layout.tensors if t.name == "blk.0.ffn_gate.weight")
    expected = layout.read(tensor)[8:24]
    monkeypatch.setattr(GgufLayout, "read", lambda self, t: pytest.fail("read the whole tensor"))
    np.testing.assert_array_equal(gguf_cache.read_rows(layout, tensor, 8, 24), expected)
    (ref,) = gguf_cache.cached_gguf_fixtures(OTHER, r"ffn_gate\.weight", (8, 24))
    assert (ref.name, ref.fmt, ref.rows, ref.cols) == ("gguf-98ce7b4927f1-blk.0.ffn_gate.weight-r8-24", "iq3_s", 16,
                                                       2560)
    assert ref.provenance == {"kind": "gguf", "file": "other-rows.gguf", "file_sha256": OTHER_SHA,
                              "tensor": "blk.0.ffn_gate.weight", "rows": [8, 24], "type": "iq3_s",
                              "path": str(OTHER.resolve())}
    np.testing.assert_array_equal(load_fixture(ref.name).raw, expected)  # found in the cache by name


def test_cached_rows_are_not_read_again(cache, monkeypatch):
    first = gguf_cache.cached_gguf_fixtures(OTHER, "ffn_down")
    assert [r.name for r in first] == ["gguf-98ce7b4927f1-blk.0.ffn_down.weight-r0-64",
                                       "gguf-98ce7b4927f1-blk.1.ffn_down.weight-r0-64"]
    before = {p: p.stat().st_mtime_ns for p in cache.iterdir()}
    monkeypatch.setattr(gguf_cache, "read_rows", lambda *a: pytest.fail("read rows again"))
    monkeypatch.setattr("strata_bench.data.store.sha256_file", lambda *a: pytest.fail("hashed again"))
    assert gguf_cache.cached_gguf_fixtures(OTHER, "ffn_down") == first
    assert {p: p.stat().st_mtime_ns for p in cache.iterdir()} == before


def test_broad_regex_leaves_out_unquantized_tensors(cache):
    refs = gguf_cache.cached_gguf_fixtures(OTHER, r"^blk\.[01]\.")
    assert [r.fmt for r in refs] == ["iq3_s", "iq2_xxs", "q8_0", "iq4_xs", "iq4_nl"]
    assert refs[-1].rows == 64 and refs[-1].cols == 512  # a 3-D expert tensor: experts x rows are its rows


@pytest.mark.parametrize("path,regex,rows,line", [
    (OTHER, "zzz", None, "--tensor 'zzz' matches no tensor in other-rows.gguf (tensors: blk.0.ffn_gate.weight, "
                         "blk.0.ffn_up.weight, blk.0.ffn_down.weight, blk.1.ffn_down.weight, "
                         "blk.1.ffn_gate_exps.weight, blk.0.attn_norm.weight, ...)"),
    (OTHER, "attn_norm", None, "tensor blk.0.attn_norm.weight has GGUF type F32, not a quant format strata-bench knows"),
    (OTHER, "ffn_down", (0, 65), "--rows 0:65 is past the end of blk.0.ffn_down.weight (64 rows)"),
    (OTHER, "ffn_down", (9, 3), "--rows 9:3 is reversed: need 0 <= A < B"),
    (OTHER, "(", None, "--tensor '(' is not a regular expression: missing ), unterminated subpattern at position 0"),
])
def test_bad_requests_write_nothing(cache, path, regex, rows, line):
    with pytest.raises(InputError) as err:
        gguf_cache.cached_gguf_fixtures(path, regex, rows)
    assert str(err.value) == line
    assert _files(cache.parent) == []


def test_bad_files_write_nothing(cache, tmp_path):
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(OTHER.read_bytes()[:5000])
    with pytest.raises(InputError, match="truncated"):
        gguf_cache.cached_gguf_fixtures(cut, "ffn_down")
    text = tmp_path / "notes.gguf"
    text.write_text("# not a model\n")
    with pytest.raises(InputError, match="is not a GGUF file"):
        gguf_cache.cached_gguf_fixtures(text, "ffn_down")
    assert _files(cache.parent) == []


def test_cache_root_defaults_to_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("STRATA_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert gguf_cache.cache_root() == tmp_path / ".cache" / "strata-bench" / "gguf-fixtures"


def _cache_when_started(regex, start):
    start.wait()  # both runs find the cache without their rows at the same moment
    gguf_cache.cached_gguf_fixtures(OTHER, regex)


def test_two_runs_sharing_the_cache_at_once_lose_no_entry(tmp_path, monkeypatch):
    """50 rounds of two processes caching other tensors' rows into one cache: every entry and file stays."""
    import multiprocessing

    from strata_bench.data.store import read_manifest

    ctx = multiprocessing.get_context("fork")
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path / "warm"))
    gguf_cache.cached_gguf_fixtures(OTHER, "ffn_down")  # the modules it needs imported once, before the forks
    for round_ in range(50):
        monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path / str(round_)))
        start = ctx.Barrier(2)
        procs = [ctx.Process(target=_cache_when_started, args=(regex, start))
                 for regex in (r"blk\.0\.ffn_down", r"blk\.1\.ffn_down")]
        for p in procs:
            p.start()
        for p in procs:
            p.join(30)
        assert [p.exitcode for p in procs] == [0, 0]
        root = gguf_cache.cache_root()
        names = ["gguf-98ce7b4927f1-blk.0.ffn_down.weight-r0-64", "gguf-98ce7b4927f1-blk.1.ffn_down.weight-r0-64"]
        assert sorted(read_manifest(root)["fixtures"]) == names
        assert _files(root) == sorted([f"{n}.npz" for n in names] + ["manifest.json", gguf_cache.SHA_INDEX])
        assert len(json.loads((root / gguf_cache.SHA_INDEX).read_text())) == 1


def test_a_zip_bomb_in_the_cache_is_refused_not_rewritten(cache, tmp_path, monkeypatch):
    # A cache file the store did not write (the store writes members uncompressed) is named, not hidden.
    from tests.zip_bomb import NAME, write_zip_bomb

    monkeypatch.chdir(tmp_path)
    path = write_zip_bomb(cache)
    before = path.read_bytes()
    with pytest.raises(InputError, match=rf"^fixture '{NAME}': {path.name}: its members declare \d+ bytes "):
        load_fixture(NAME)
    assert path.read_bytes() == before
