"""error.allowance on small cases of the mmvq family: q8_0's is the fp32-order rounding term alone; the
truncating iq2_xxs adds 2 |d_x| |d_w| per chunk, iq1_s 16.875 |s - d_x sum q| |d_w|. Every term is
computed here again from the bytes of the weight and q8_1 blocks."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.cases import Expected
from strata_bench.families import load_builtin_families
from strata_bench.ggml.error import GgmlErrorModel, allowance

U = 2.0 ** -24


@pytest.fixture
def mmvq():
    return load_builtin_families()["mmvq"]


def _q8_1(act, nchunks):
    """(d, s, q) of each column's q8_1 blocks: fp16 d, fp16 s, 32 int8 codes in 36 bytes."""
    blocks = np.ascontiguousarray(act).reshape(act.shape[0], -1)[:, :nchunks * 36].reshape(act.shape[0], nchunks, 36)
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float64)
    s = blocks[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float64)
    q = blocks[..., 4:].copy().view(np.int8).astype(np.float64)
    return d, s, q


def _d_w(raw, rows, cols, type_size, block_size):
    """Each 32-value chunk's block d: the fp16 at its block's first two bytes, (rows, chunks)."""
    nblocks = cols // block_size
    blocks = np.ascontiguousarray(raw).reshape(rows, -1)[:, :nblocks * type_size].reshape(rows, nblocks, type_size)
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float64)
    return np.repeat(d, block_size // 32, axis=1)


def _rounding(w_abs, xq_abs, nchunks):
    return (4 + 8 + 5 + nchunks) * U * 1.01 * (xq_abs @ w_abs.T)


def _xq(act, nchunks):
    d, _, q = _q8_1(act, nchunks)
    return np.abs((d[..., None] * q).reshape(act.shape[0], -1))


def test_q8_0_is_the_rounding_term_alone(mmvq):
    case = mmvq.case("q8_0", 5, 256, 3)
    host = mmvq.make_inputs(case)
    rows, nchunks = 5, 8
    blocks = np.ascontiguousarray(host["raw"]).reshape(rows, nchunks, 34)
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float64)
    codes = blocks[..., 2:].copy().view(np.int8).astype(np.float64)
    w = np.abs((d[..., None] * codes).reshape(rows, 256))
    got = allowance("q8_0", host["raw"], host["act"], 256)
    assert got.shape == (3, 5)
    np.testing.assert_array_equal(got, _rounding(w, _xq(host["act"], nchunks), nchunks))
    assert (got > 0).all()


@pytest.mark.parametrize("fmt,type_size,term", [("iq2_xxs", 66, "truncation"), ("iq1_s", 50, "raw sum")])
def test_what_ggml_arithmetic_adds(mmvq, fmt, type_size, term):
    rows, cols, ncols = 6, 512, 2
    case = mmvq.case(fmt, rows, cols, ncols)
    host = mmvq.make_inputs(case)
    nchunks = cols // 32
    from strata_bench.formats import get_format

    w = np.abs(get_format(fmt).dequantize(host["raw"].reshape(rows, -1)).astype(np.float64).reshape(rows, cols))
    rounding = _rounding(w, _xq(host["act"], nchunks), nchunks)
    d_w = np.abs(_d_w(host["raw"], rows, cols, type_size, 256))
    d_x, s, q = _q8_1(host["act"], nchunks)
    if term == "truncation":
        extra = 2.0 * (np.abs(d_x) @ d_w.T)
    else:
        extra = 16.875 * (np.abs(s - d_x * q.sum(axis=-1)) @ d_w.T)
    got = allowance(fmt, host["raw"], host["act"], cols)
    assert got.shape == (ncols, rows) and (extra > 0).all()
    np.testing.assert_array_equal(got, rounding + extra)  # the same sums in the same order: bit for bit


def test_each_output_is_held_to_its_own_family_bound_plus_its_own_allowance(mmvq):
    case = mmvq.case("iq2_xxs", 6, 512, 2)
    host = mmvq.make_inputs(case)
    model = GgmlErrorModel(("iq2_xxs", "iq1_s"))
    assert model.applies("iq2_xxs") and not model.applies("q4_k")
    tol = np.array([[1e-3, 2e-3, 0, 0, 0, 0], [0, 0, 0, 0, 0, 5e-3]])
    exp = Expected("y", np.zeros((2, 6)), tol, why="t")
    extra = allowance("iq2_xxs", host["raw"], host["act"], 512)
    np.testing.assert_array_equal(model.bounds(case, host, exp, None), tol + extra)
    scalar = Expected("y", np.zeros((2, 6)), 1e-3, why="t")  # a scalar family bound is broadcast
    np.testing.assert_array_equal(model.bounds(case, host, scalar, None), 1e-3 + extra)
    assert model.judges_baseline


def test_last_case_computes_once_per_key_and_again_for_a_new_one():
    from strata_bench.ggml.error import LastCase

    calls = []
    last = LastCase()

    def compute(value):
        return lambda: calls.append(value) or value

    assert [last.get(None, compute("a")), last.get(None, compute("b")), last.get(("c", 1), compute("c")),
            last.get(("c", 1), compute("d")), last.get(None, compute("e"))] == ["a", "a", "c", "c", "e"]
    assert calls == ["a", "c", "e"]
