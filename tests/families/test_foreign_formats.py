"""mmvq and dequant cases of formats only a foreign variant runs (q4_0 .. q5_1, K-quants): a stand-in engine
variant declaring them gets real, checked cases of its own, and nothing changes for the built-in formats."""
from __future__ import annotations

import gguf
import numpy as np
import pytest

from strata_bench.families import load_builtin_families
from strata_bench.formats import get_format
from strata_bench.kit import KERNEL_FORMATS, Variant
from strata_bench.numerics.bounds import U64

FOREIGN = ("q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k")
SHIPPED = ("q3_k", "q4_0", "q4_1", "q4_k", "q5_0", "q6_k")  # fixtures/smollm2-ffn_down.<fmt>


def _never_on_the_cpu(*args, **kwargs):
    raise AssertionError("the stand-in's launch runs on a GPU only")


ENGINE = Variant("engine", lambda family, source: [], _never_on_the_cpu, "an engine's kernels (stand-in)",
                 formats=FOREIGN)


def _with_engine(name: str):
    """A fresh instance of a built-in family (the registry's stays as it is) with the stand-in added."""
    family = type(load_builtin_families()[name])()
    family.add_variant(ENGINE)
    return family


def _by_format(cases) -> dict[str, list]:
    out: dict[str, list] = {}
    for case in cases:
        out.setdefault(case.fmt, []).append(case)
    return out


@pytest.mark.parametrize("name", ["mmvq", "dequant"])
def test_the_built_in_cases_are_those_of_the_family_without_the_stand_in(name):
    registered = load_builtin_families()[name]
    with_engine = _with_engine(name)
    assert registered.foreign_formats() == () and with_engine.foreign_formats() == FOREIGN
    assert [c for c in with_engine.default_cases() if c.fmt in KERNEL_FORMATS] == list(registered.default_cases())
    assert [c for c in with_engine.bench_cases() if c.fmt in KERNEL_FORMATS] == list(registered.bench_cases())
    assert {c.fmt for c in registered.default_cases()} == set(KERNEL_FORMATS)


@pytest.mark.parametrize("name", ["mmvq", "dequant"])
def test_each_foreign_format_has_cases_listing_only_the_stand_in(name):
    family = _with_engine(name)
    cases = _by_format(family.default_cases())
    bench = _by_format(family.bench_cases())
    for fmt in FOREIGN:
        assert cases[fmt] and all(c.variants == ("engine",) for c in cases[fmt]), fmt
        assert bench[fmt] and all(c.variants == ("engine",) for c in bench[fmt])
        block = get_format(fmt).block_size
        assert any(c.cols == block for c in cases[fmt]), "a row of one block"
        assert (fmt in SHIPPED) == any(c.data.startswith("fixture:") for c in cases[fmt])


def test_mmvq_foreign_cases_cover_1_to_8_columns_and_the_edge_shapes_in_tens():
    cases = _by_format(_with_engine("mmvq").default_cases())
    for fmt in FOREIGN:
        mine = cases[fmt]
        assert len(mine) <= 30
        assert {c.ncols for c in mine} == set(range(1, 9))
        assert any(c.rows % 2 for c in mine) and any(c.rows % 4 and not c.rows % 2 for c in mine)
        assert any(c.cols // get_format(fmt).block_size >= 8 for c in mine)
        # No contract says how an engine's kernel treats columns: no 1-column comparisons.
        assert all(_with_engine("mmvq").related_cases(c) == [] for c in mine)


def _case(family, fmt: str, data: str = "seed:1"):
    """The family's first case of `fmt` with `data`'s kind (a small one: the one-block rows or the fixture)."""
    kind = data.split(":")[0]
    cases = [c for c in family.default_cases() if c.fmt == fmt and c.data.startswith(kind)]
    return min(cases, key=lambda c: (c.rows * c.cols, c.ncols))


def _fp16_fields_finite(fmt: str, raw: np.ndarray) -> bool:
    spec = get_format(fmt)
    return all(np.isfinite(f.read(spec.blocks(raw))).all() for f in spec.scales)


@pytest.mark.parametrize("name", ["mmvq", "dequant"])
@pytest.mark.parametrize("fmt", FOREIGN)
def test_inputs_are_deterministic_and_valid(name, fmt):
    family = _with_engine(name)
    for case in [c for c in family.default_cases() if c.fmt == fmt][:4]:
        first, again = family.make_inputs(case), family.make_inputs(case)
        assert np.array_equal(first["raw"], again["raw"]) and np.array_equal(first["padded"], again["padded"])
        assert first["raw"].shape == (case.rows, get_format(fmt).bytes_per_row(case.cols))
        assert _fp16_fields_finite(fmt, first["raw"])
        assert np.isfinite(get_format(fmt).dequantize(first["raw"])).all()
        assert family.bytes_moved(case) > case.rows * first["raw"].shape[1]


@pytest.mark.parametrize("fmt", FOREIGN)
def test_dequant_references_are_gguf_py_bit_for_bit(fmt):
    family = _with_engine("dequant")
    for data in ("seed:1", "edge:2"):
        case = _case(family, fmt, data)
        host = family.make_inputs(case)
        oracle = gguf.quants.dequantize(host["raw"], get_format(fmt).qtype)
        bits, values, exact = family.reference(case, host)
        assert np.array_equal(bits.ref, oracle.view(np.uint32).astype(np.float64)) and bits.tol == 0.0
        assert np.array_equal(values.ref, oracle.astype(np.float64)) and values.tol == 0.0
        assert np.all(np.abs(oracle - exact.ref) <= exact.tol)
        assert family.describe_index(case, "y", (1, 40)).startswith("row 1, column 40, block ")


def _independent_weights(fmt: str, raw: np.ndarray) -> np.ndarray:
    """float64 values from gguf-py, one scale field at a time (the others' bytes zeroed): each is a product
    float32 holds exactly, so their float64 sum is exact where gguf-py's float32 sum of them rounds."""
    spec = get_format(fmt)
    total = np.zeros((raw.shape[0], raw.shape[1] // spec.type_size * spec.block_size))
    for field in spec.scales:
        alone = spec.blocks(raw).copy()
        for other in spec.scales:
            if other is not field:
                alone[:, other.offset:other.offset + 2] = 0
        total += gguf.quants.dequantize(alone.reshape(raw.shape), spec.qtype).astype(np.float64)
    return total


def _q8_1_values(act: np.ndarray) -> np.ndarray:
    """The q8_1 blocks' values, decoded here: fp16 d (bytes 0-1) times the int8 codes (bytes 4-35)."""
    blocks = act.reshape(act.shape[0], -1, 36)
    d = blocks[..., :2].copy().view(np.float16)[..., 0].astype(np.float64)
    return (d[..., None] * blocks[..., 4:].view(np.int8)).reshape(act.shape[0], -1)


@pytest.mark.parametrize("fmt", FOREIGN)
def test_mmvq_reference_is_the_float64_product_of_the_exact_values(fmt):
    family = _with_engine("mmvq")
    for data in ("seed:1",) + (("fixture:",) if fmt in SHIPPED else ()):
        case = _case(family, fmt, data)
        host = family.make_inputs(case)
        w = _independent_weights(fmt, host["raw"])
        xq, x = _q8_1_values(host["act"]), host["x"].astype(np.float64)
        q8, raw = family.reference(case, host)
        for exp, acts in ((q8, xq), (raw, x)):
            assert exp.ref.shape == exp.tol.shape == (case.ncols, case.rows)
            slack = 2 * case.cols * U64 * (np.abs(w) @ np.abs(acts).T).T
            assert np.all(np.abs(exp.ref - (w @ acts.T).T) <= slack)
            assert np.all(np.isfinite(exp.tol)) and np.all(exp.tol > 0)
        assert np.all(q8.tol <= raw.tol)
        assert family.describe_index(case, "y", (0, 3)) == "column 0, row 3"


def test_fixture_cases_take_a_foreign_formats_rows_only_where_a_variant_declares_it():
    from strata_bench.cases.fixtures import fixture_ref

    shipped = fixture_ref("smollm2-ffn_down.q4_k")
    for name in ("mmvq", "dequant"):
        assert load_builtin_families()[name].fixture_cases(shipped) == []
        cases = _with_engine(name).fixture_cases(shipped)
        assert cases and all(c.fmt == "q4_k" and c.variants == ("engine",) for c in cases)
    assert [c.ncols for c in _with_engine("mmvq").fixture_cases(shipped)] == [1, 3, 8]
    assert [c.ncols for c in _with_engine("mmvq").fixture_cases(shipped, (2, 5))] == [2, 5]


def test_gguf_rows_of_a_foreign_format_become_cases_of_the_declaring_variant(tmp_path, monkeypatch):
    """--gguf: real q4_k and q5_0 rows read from a GGUF file (the committed smollm2-rows.gguf) are cases of
    the stand-in alone, with inputs and references like the shipped ones; without it, of no family."""
    from pathlib import Path

    from strata_bench.cases import CaseFilter
    from strata_bench.cases.fixtures import fixture_request_cases
    from strata_bench.cases.request import CaseRequest
    from strata_bench.errors import InputError

    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path))
    gguf_file = Path(__file__).resolve().parents[2] / "fixtures" / "smollm2-rows.gguf"
    request = CaseRequest(gguf=str(gguf_file), tensor=r"^ffn_down\.q(4_k|5_0)$", rows=(0, 16))
    engine = {name: _with_engine(name) for name in ("mmvq", "dequant")}
    cases = fixture_request_cases(CaseFilter(), request, engine, lambda line: None)
    assert sorted({(c.family, c.fmt, c.rows, c.cols) for c in cases}) == [
        ("dequant", "q4_k", 16, 1536), ("dequant", "q5_0", 16, 1536),
        ("mmvq", "q4_k", 16, 1536), ("mmvq", "q5_0", 16, 1536)]
    assert all(c.variants == ("engine",) for c in cases)
    assert sorted(c.ncols for c in cases if c.family == "mmvq" and c.fmt == "q4_k") == [1, 3, 8]
    for case in cases[:2] + cases[-2:]:
        family = engine[case.family]
        host = family.make_inputs(case)
        assert _fp16_fields_finite(case.fmt, host["raw"])
        assert all(np.all(np.isfinite(e.ref)) for e in family.reference(case, host))
    builtin = {name: load_builtin_families()[name] for name in ("mmvq", "dequant")}
    with pytest.raises(InputError, match=r"^no case over the 2 fixture\(s\) passes the filters"):
        fixture_request_cases(CaseFilter(), request, builtin, lambda line: None)
