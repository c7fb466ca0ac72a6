"""The reference disk cache: a cached reference is the computed one bit for bit, and every check computed
from it (max_err, nmse, ok, detail) is exactly the same; keys follow the input bytes; bad entries are
computed again; user families and STRATA_REF_CACHE=off bypass it."""
from __future__ import annotations

import math

import numpy as np
import pytest

from strata_bench.cases import Case, Expected

from strata_bench.families import load_builtin_families
from strata_bench.checks import refcache
from strata_bench.checks.parity import _error_equal_checks, _reference_checks
from strata_bench.checks.refstats import RefStats, reference_stats
from strata_bench.gpu.launch import VariantRun

# Small default cases of families whose outputs are checked as they are (output_values is the output).
CASES = [("mmvq", "q8_0", 64, 1536, 3, "fixture:smollm2-ffn_down.q8_0"), ("mmvq", "iq2_xxs", 512, 2560, 4, "edge:2"),
         ("q2warp", "q2_0", 12288, 2560, 1, "seed:1"), ("fp16deq", "q8_0", 96, 4096, 1, "seed:1")]


def _default_case(name, fmt, rows, cols, ncols, data):
    families = load_builtin_families()
    family = families[name]
    for case in family.default_cases():
        if (case.fmt, case.rows, case.cols, case.ncols, case.data) == (fmt, rows, cols, ncols, data):
            return family, case
    # A vanished case would silently drop what these tests prove: fail, naming it, so the list is updated.
    pytest.fail(f"no default case {name}/{fmt}/{rows}x{cols}/n{ncols}/{data}: choose another in CASES")


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _fields(check):
    return tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in vars(check).values())


def _stats(stats):
    """Statistics as their JSON text (NaN equal to NaN)."""
    import json

    return [json.dumps(s.to_json()) for s in stats]


def _runs_from(refs, seed):
    """Two variants' outputs made from the references: 'old' is float32(ref), 'new' the same with a few
    elements moved (so both the shared and the separate comparison paths run)."""
    rng = np.random.default_rng(seed)
    outputs = {}
    for exp in refs:
        outputs.setdefault(exp.output, np.asarray(exp.ref, dtype=np.float32))
    moved = {}
    for name, y in outputs.items():
        z = y.copy().ravel()
        z[rng.integers(0, z.size, 3)] *= np.float32(1.001)
        moved[name] = z.reshape(y.shape)
    unwritten = {name: np.zeros(y.shape, bool) for name, y in outputs.items()}
    return {"old": VariantRun("old", outputs, unwritten), "new": VariantRun("new", moved, unwritten)}


@pytest.mark.parametrize("spec", CASES, ids=lambda s: f"{s[0]}-{s[1]}-n{s[4]}-{s[5].split(':')[0]}")
def test_cached_references_and_their_checks_are_bit_identical(spec, cache):
    family, case = _default_case(*spec)
    host = family.make_inputs(case)
    computed = tuple(family.reference(case, host))
    stored = refcache.cached_references(family, case, host)  # cold: computes and stores
    assert list(cache.rglob("*.ref")), "the cold call stored an entry"
    loaded = refcache.cached_references(family, case, host, compute=lambda: pytest.fail("recomputed"))
    for refs in (stored, loaded):
        assert len(refs) == len(computed)
        for got, want in zip(refs, computed):
            assert (got.output, got.why, got.label) == (want.output, want.why, want.label)
            assert type(got.tol) is type(want.tol) or isinstance(want.tol, np.ndarray)
            assert _same_bits(got.tol, want.tol)
            assert _same_bits(got.ref, want.ref)
    for seed in (0, 1):
        runs = _runs_from(computed, seed)
        want = _reference_checks(family, case, runs, computed)
        want += _error_equal_checks(family, case, want)
        got = _reference_checks(family, case, runs, loaded)
        got += _error_equal_checks(family, case, got)
        assert [_fields(c) for c in got] == [_fields(c) for c in want]
        # The entry's statistics, read instead of a pass over each reference: the same checks.
        found = refcache.lookup_references(family, case, host)
        assert _stats(found.stats) == _stats(reference_stats(e) for e in computed)
        kept = _reference_checks(family, case, runs, found.refs, known=found.stats)
        kept += _error_equal_checks(family, case, kept)
        assert [_fields(c) for c in kept] == [_fields(c) for c in want]


def test_key_follows_input_bytes_case_and_nesting(cache):
    case = Case("mmvq", "q8_0", 8, 32)
    host = {"w": np.arange(6, dtype=np.float32), "sub": {"k": np.zeros(3, np.uint8), "cols": slice(0, 1)}}
    key = refcache.reference_key(case, host)
    assert key == refcache.reference_key(case, {"sub": dict(host["sub"]), "w": host["w"].copy()})
    changed = dict(host, w=host["w"].copy())
    changed["w"][5] = np.float32(5.0000005)
    assert refcache.reference_key(case, changed) != key
    assert refcache.reference_key(case, dict(host, w=host["w"].astype(np.float64))) != key
    assert refcache.reference_key(case, dict(host, w=host["w"].reshape(2, 3))) != key
    assert refcache.reference_key(Case("mmvq", "q8_0", 8, 32, ncols=2), host) != key
    assert refcache.reference_key(case, dict(host, extra=object())) is None  # not keyable: no caching


class _Counting:
    """A built-in-looking family whose reference counts its calls."""

    def __init__(self, refs):
        self.calls, self.refs = 0, refs

    def reference(self, case, host):
        self.calls += 1
        return list(self.refs)


def _counting(refs, monkeypatch):
    fam = _Counting(refs)
    monkeypatch.setattr(refcache, "_builtin", lambda family: True)
    return fam


def _entry_header(path):
    import json

    data = path.read_bytes()
    assert data[:8] == b"STRATREF"
    return json.loads(data[16:16 + int.from_bytes(data[8:16], "little")])


def test_entries_of_every_dtype_shape_and_size_round_trip_and_foreign_files_are_recomputed(cache, monkeypatch):
    arrays = [np.zeros((0, 3)), np.arange(7, dtype=np.float32), np.array(3.5), np.arange(24, dtype=">f8").reshape(2, 3, 4),
              np.asfortranarray(np.linspace(0, 1, 12).reshape(3, 4)), np.array([1, 2, 3], dtype=np.int16)]
    refs = [Expected(f"o{i}", a, float(i), "w", f"l{i}") for i, a in enumerate(arrays)]
    fam = _counting(refs, monkeypatch)
    case, host = Case("mmvq", "q8_0", 8, 32), {"x": np.ones(4, np.float32)}
    refcache.cached_references(fam, case, host)
    again = refcache.cached_references(fam, case, host)
    assert fam.calls == 1
    assert [(e.output, e.tol, e.label) for e in again] == [(e.output, e.tol, e.label) for e in refs]
    assert all(_same_bits(a.ref, b.ref) for a, b in zip(again, refs))
    (entry,) = cache.rglob("*.ref")
    entry.write_bytes(b"PK\3\4" + entry.read_bytes()[4:])  # not an entry (an old .npz, say): computed again
    refcache.cached_references(fam, case, host)
    assert fam.calls == 2
    entry.write_bytes(entry.read_bytes() + b"\0")  # longer than its header says
    refcache.cached_references(fam, case, host)
    assert fam.calls == 3


def test_entry_round_trips_shared_arrays_and_bad_entries_are_recomputed(cache, monkeypatch):
    y = np.linspace(-1, 1, 12).reshape(3, 4)
    refs = [Expected("y", y, 0.5, "why", "a"), Expected("z", y.copy(), 1.0, "w2", "b"),
            Expected("y", np.array([np.inf, -0.0, np.nan]), 2.0, "w3", "c")]
    fam = _counting(refs, monkeypatch)
    case, host = Case("mmvq", "q8_0", 8, 32), {"x": np.ones(4, np.float32)}
    refcache.cached_references(fam, case, host)
    again = refcache.cached_references(fam, case, host)
    assert fam.calls == 1
    assert all(_same_bits(a.ref, b.ref) and a.tol == b.tol for a, b in zip(again, refs))
    (entry,) = cache.rglob("*.ref")
    header = _entry_header(entry)
    assert len(header["arrays"]) == 2 and [m["array"] for m in header["meta"]] == [0, 0, 1]  # y and its copy once
    assert all(a["offset"] % 64 == 0 for a in header["arrays"]) and header["size"] == entry.stat().st_size
    assert not again[0].ref.flags.writeable  # a view of the mapped file
    assert not list(cache.rglob("*.tmp"))
    entry.write_bytes(entry.read_bytes()[:100])  # truncated: computed again and rewritten
    refcache.cached_references(fam, case, host)
    assert fam.calls == 2
    refcache.cached_references(fam, case, host)
    assert fam.calls == 2


def test_per_element_tolerances_round_trip_as_arrays_and_their_checks_are_the_same(cache, monkeypatch, toy_family):
    y = np.linspace(-1, 1, 12).reshape(3, 4)
    bound = np.abs(y) * 1e-3 + 1e-6
    refs = [Expected("y", y, bound, "each its own", "q"), Expected("y", y * 2, bound.copy(), "shared", "raw"),
            Expected("y", y, 0.25, "one bound", "scalar"), Expected("y", y, bound[0], "per row", "row")]
    fam = _counting(refs, monkeypatch)
    case, host = Case("mmvq", "q8_0", 8, 32), {"x": np.ones(4, np.float32)}
    refcache.cached_references(fam, case, host)
    again = refcache.cached_references(fam, case, host)
    assert fam.calls == 1  # stored, not bypassed
    assert [type(e.tol) for e in again] == [np.ndarray, np.ndarray, float, np.ndarray]
    assert all(_same_bits(a.tol, b.tol) and _same_bits(a.ref, b.ref) for a, b in zip(again, refs))
    (entry,) = cache.rglob("*.ref")
    header = _entry_header(entry)
    # y, bound (stored once for both references), 2y, bound's first row
    assert [(m["array"], m.get("tol_array"), m.get("tol")) for m in header["meta"]] == [
        (0, 1, None), (2, 1, None), (0, None, 0.25), (0, 3, None)]
    got = np.asarray(y + bound * np.array([0.5, 1.5, 0.5, 0.5]), dtype=np.float32)
    runs = {"v": VariantRun("v", {"y": got}, {"y": np.zeros(got.shape, bool)})}
    want = _reference_checks(toy_family, case, runs, refs)
    assert not all(c.ok for c in want)  # column 1 is above the per-element bounds
    assert [_fields(c) for c in _reference_checks(toy_family, case, runs, again)] == [_fields(c) for c in want]


def test_off_switch_user_families_and_oversized_entries_bypass_the_cache(cache, monkeypatch):
    case, host = Case("mmvq", "q8_0", 8, 32), {"x": np.ones(4, np.float32)}
    user = _Counting([Expected("y", np.zeros(2), 1.0, "w")])
    refcache.cached_references(user, case, host)
    assert not cache.exists()  # a class outside strata_bench is never cached
    fam = _counting([Expected("y", np.zeros(2), 1.0, "w")], monkeypatch)
    monkeypatch.setenv("STRATA_REF_CACHE", "off")
    refcache.cached_references(fam, case, host)
    assert not cache.exists()
    monkeypatch.delenv("STRATA_REF_CACHE")
    monkeypatch.setattr(refcache, "MAX_ENTRY_BYTES", 8)
    refcache.cached_references(fam, case, host)
    assert not list(cache.rglob("*.ref"))
    monkeypatch.setattr(refcache, "MAX_ENTRY_BYTES", 16)
    refcache.cached_references(fam, case, host)
    assert len(list(cache.rglob("*.ref"))) == 1


def test_cache_folder_is_never_inside_the_package(monkeypatch, tmp_path):
    monkeypatch.delenv("STRATA_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert refcache.cache_dir() == tmp_path / ".cache" / "strata-bench" / "references"
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path / "c"))
    assert refcache.cache_dir() == tmp_path / "c" / "references"


def test_key_holds_the_blas_thread_settings(cache, monkeypatch):
    case = Case("mmvq", "q8_0", 8, 32)
    host = {"w": np.arange(6, dtype=np.float32)}
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    cores = refcache.os.cpu_count()
    assert refcache.blas_threads() == (cores, None, None, None)
    assert refcache.single_thread_blas() == (cores, "1", "1", "1")
    assert refcache.blas_threads({"OMP_NUM_THREADS": "3"}) == (cores, None, "3", None)
    own = refcache.reference_key(case, host, refcache.blas_threads())
    single = refcache.reference_key(case, host, refcache.single_thread_blas())
    assert own == refcache.reference_key(case, host, (cores, None, None, None)) and single != own
    # By default the settings references are computed under: one thread where it can be set at run time.
    monkeypatch.setattr(refcache, "compute_settings", refcache.single_thread_blas)
    assert refcache.reference_key(case, host) == single
    monkeypatch.setattr(refcache, "compute_settings", refcache.blas_threads)
    assert refcache.reference_key(case, host) == own
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MKL_NUM_THREADS", "1")
    assert refcache.reference_key(case, host) == single  # a process started with one thread shares the workers'


def test_the_statistics_stored_with_a_reference_are_what_the_checks_read(cache, monkeypatch, toy_family):
    """An entry holds each reference's statistics (non-finite, per-element bounds included), read back
    exactly; the checks of a hit take them (no pass over the reference), a miss or an entry without
    them (written before they were stored) computes them."""
    import json
    from strata_bench.checks import f64

    ref = np.array([[1.5, -3.0, np.inf], [0.1, np.nan, 2.0 ** -1074]])
    refs = [Expected("y", ref, 1e-3, "t", "a"), Expected("y", ref * 3.0, np.abs(ref) + 1e-300, "u", "b")]
    fam = _Counting(refs)
    fam.__class__.__module__ = "strata_bench.families.fake"
    case, host = Case("mmvq", "q8_0", 2, 3), {"w": np.arange(3.0)}
    refcache.cached_references(fam, case, host)
    found = refcache.lookup_references(fam, case, host)
    want = tuple(reference_stats(e) for e in refs)
    assert _stats(found.stats) == _stats(want) and not want[0].all_finite and math.isnan(want[1].largest_bound)
    assert want[0] == RefStats(False, 3.0, 1.5 ** 2 + 9.0 + 0.1 ** 2 + 2.0 ** -1074 * 2.0 ** -1074, 1e-3)
    runs = {"old": VariantRun("old", {"y": ref.astype(np.float32)}, {"y": np.zeros(ref.shape, bool)})}
    plain = _reference_checks(toy_family, case, runs, found.refs)
    monkeypatch.setattr(f64, "reference_stats", lambda *a: pytest.fail("computed again"))
    assert [_fields(c) for c in _reference_checks(toy_family, case, runs, found.refs, known=found.stats)] == \
        [_fields(c) for c in plain]
    entry = next(cache.rglob("*.ref"))
    data = entry.read_bytes()
    length = int.from_bytes(data[8:16], "little")
    header = json.loads(data[16:16 + length])
    for m in header["meta"]:
        del m["stats"]
    text = json.dumps(header).encode().ljust(length)  # shorter: padded, the arrays stay where they were
    entry.write_bytes(data[:8] + length.to_bytes(8, "little") + text + data[16 + length:])
    assert refcache.lookup_references(fam, case, host).stats == (None, None)


def test_a_large_input_is_hashed_as_pieces_on_the_pieces_threads(monkeypatch):
    """From TREE_BYTES up an array's digest is sha256 over its 1 MiB pieces' sha256s, the pieces hashed
    on the pieces' threads; below it, sha256 of its bytes."""
    import hashlib

    from strata_bench.checks import pieces

    ran = []
    monkeypatch.setattr(pieces, "run", lambda tasks: ran.append(len(tasks)) or [task() for task in tasks])
    big = np.random.default_rng(1).integers(0, 255, (9 << 20) + 3, dtype=np.uint8)
    raw = big.tobytes()
    want = hashlib.sha256(b"tree1048576:" + b"".join(hashlib.sha256(raw[i:i + (1 << 20)]).digest()
                                                     for i in range(0, len(raw), 1 << 20))).hexdigest()
    assert refcache._array_digest(big[::1].copy()) == want and ran == [10]
    small = big[:(4 << 20) - 1]
    assert refcache._array_digest(small) == hashlib.sha256(small.tobytes()).hexdigest() and ran == [10]
    wide = big[:(4 << 20) * 2].view(np.float64).reshape(-1, 2)[:, 0]  # not contiguous: its values' bytes
    assert refcache._array_digest(wide) == refcache._array_digest(np.ascontiguousarray(wide))
