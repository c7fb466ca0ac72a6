"""fp16deq family: compile, cases, the dispatcher, the exactness claims of the arithmetic contract, and host
emulations of both kernels' index math against the correctly rounded reference."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.families import load_builtin_families
from strata_bench.families import fp16deq as mod

FAMILY = load_builtin_families()["fp16deq"]
KVALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.float32)


def test_kvalues_match_gguf():
    import gguf

    assert np.array_equal(KVALUES, np.asarray(gguf.quants.IQ4_NL.kvalues, dtype=np.float32).ravel())


# --- cases and dispatch ---------------------------------------------------------------------------
def test_cases_cover_both_formats_and_every_kind():
    cases = list(FAMILY.default_cases())
    for fmt in ("q8_0", "iq4_xs"):
        mine = [c for c in cases if c.fmt == fmt]
        assert any(c.data.startswith("edge") for c in mine)
        assert any(c.param("row0", 0) > 0 and c.param("of") > c.rows for c in mine)
        assert any(c.param("ld", c.cols) > c.cols and c.param("path") == "vec16" for c in mine)
        assert any(c.param("ld", c.cols) % 8 and c.param("path") == "generic" for c in mine)
        assert any(c.param("offset", 0) % 8 and c.param("path") == "generic" for c in mine)
        assert any(c.data.startswith("fixture") for c in mine)
    bench = list(FAMILY.bench_cases())
    assert all(c.cols >= 8192 and c.rows >= 8192 and c.param("path") == "vec16" for c in bench)


def test_dispatcher_takes_vec16_only_when_every_store_is_aligned():
    assert mod.choose_kernel("q8_0", 0x1000, 4096, 0x2002) == "vec16"  # Q8_0 loads are 2-byte
    assert mod.choose_kernel("q8_0", 0x1002, 4096, 0x2000) == "generic"  # output 2 bytes off
    assert mod.choose_kernel("q8_0", 0x1008, 4096, 0x2000) == "generic"  # output 8 bytes off
    assert mod.choose_kernel("q8_0", 0x1000, 4099, 0x2000) == "generic"  # rows not 16-byte aligned
    assert mod.choose_kernel("iq4_xs", 0x1000, 4096, 0x2004) == "generic"  # IQ4_XS needs 8-byte source
    assert mod.choose_kernel("iq4_xs", 0x1000, 4104, 0x2008) == "vec16"


def test_padding_is_masked_and_nan_in_the_reference():
    case = FAMILY.path_case("q8_0", 40, 2048, "seed:4", "vec16", ld=2056)
    mask = FAMILY.written_mask(case, "y")
    assert mask.shape == (40, 2056) and mask[:, :2048].all() and not mask[:, 2048:].any()
    (exp,) = FAMILY.reference(case, FAMILY.make_inputs(case))
    assert exp.tol == 0 and np.isnan(exp.ref[:, 2048:]).all() and np.isfinite(exp.ref[:, :2048]).all()
    assert FAMILY.written_mask(FAMILY.path_case("q8_0", 4, 64, "seed:1", "vec16"), "y") is None


def test_bytes_moved():
    case = FAMILY.path_case("iq4_xs", 8192, 8192, "seed:1", "vec16")
    assert FAMILY.bytes_moved(case) == 8192 * 32 * 136 + 8192 * 8192 * 2


# --- the contract's exactness claims ---------------------------------------------------------------
def _all_finite_fp16() -> np.ndarray:
    h = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    return h[np.isfinite(h)].astype(np.float32)


def test_q8_0_products_are_exact_in_fp32_for_every_scale_and_code():
    d = _all_finite_fp16()[:, None]
    q = np.arange(-128, 128, dtype=np.float32)[None, :]
    assert np.array_equal((d * q).astype(np.float64), d.astype(np.float64) * q.astype(np.float64))


def test_iq4_xs_products_are_exact_in_fp32_for_every_scale_sub_scale_and_kvalue():
    d = _all_finite_fp16()[:, None]
    ls = np.arange(-32, 32, dtype=np.float32)[None, :]
    scale = d * ls
    assert np.array_equal(scale.astype(np.float64), d.astype(np.float64) * ls.astype(np.float64))
    for k in KVALUES:
        assert np.array_equal((scale * k).astype(np.float64), scale.astype(np.float64) * float(k))


# --- host emulations of the kernels ------------------------------------------------------------------
def emulate(fmt: str, path: str, raw: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Each kernel's per-thread byte addressing and fp32 arithmetic, vectorized over threads."""
    flat = np.ascontiguousarray(raw).ravel()
    f16 = lambda lo, hi: (lo.astype(np.uint16) | (hi.astype(np.uint16) << 8)).view(np.float16).astype(np.float32)
    if fmt == "q8_0":
        per = 32 if path == "generic" else 8
        t = np.arange(rows * cols // per)
        blk = (t if path == "generic" else t >> 2) * 34
        first = 2 + (np.zeros_like(t) if path == "generic" else 8 * (t & 3))
        d = f16(flat[blk], flat[blk + 1])
        idx = blk[:, None] + first[:, None] + np.arange(per)[None, :]
        return (d[:, None] * flat[idx].view(np.int8).astype(np.float32)).astype(np.float16).reshape(rows, cols)
    if path == "generic":  # thread per 32-value sub-block
        t = np.arange(rows * cols // 32)
        blk, ib = (t >> 3) * 136, t & 7
        j = np.arange(16)[None, :]
        qs = flat[blk[:, None] + 8 + 16 * ib[:, None] + j]
        codes = np.concatenate([qs & 15, qs >> 4], axis=1)
    else:  # thread per 8 outputs
        t = np.arange(rows * cols // 8)
        blk, within = (t >> 5) * 136, t & 31
        ib, quarter = within >> 2, within & 3
        qs = flat[blk[:, None] + 8 + 16 * ib[:, None] + 8 * (quarter[:, None] & 1) + np.arange(8)[None, :]]
        codes = (qs >> (4 * (quarter[:, None] >> 1)).astype(np.uint8)) & 15
    d = f16(flat[blk], flat[blk + 1])
    scales_h = flat[blk + 2].astype(np.int64) | (flat[blk + 3].astype(np.int64) << 8)
    scales_l = flat[blk + 4 + (ib >> 1)].astype(np.int64)
    ls = ((scales_l >> (4 * (ib & 1))) & 15) | (((scales_h >> (2 * ib)) & 3) << 4)
    scale = d * (ls - 32).astype(np.float32)
    return (scale[:, None] * KVALUES[codes]).astype(np.float16).reshape(rows, cols)


@pytest.mark.parametrize("fmt", ["q8_0", "iq4_xs"])
@pytest.mark.parametrize("path", ["generic", "vec16"])
@pytest.mark.parametrize("edge", [False, True])
def test_kernel_emulations_equal_the_correctly_rounded_reference(fmt, path, edge):
    from strata_bench.data.synthetic import synthetic_weights

    raw = synthetic_weights(fmt, 6, 512, seed=11, edge=edge)
    if edge:
        raw = mod.with_subnormal_scales(fmt, raw)
    with np.errstate(over="ignore"):
        got = emulate(fmt, path, raw, 6, 512)
    ref = mod.exact_fp16(fmt, raw)
    # Values, not bits: the oracle's float64 sum drops the sign of zero (0 + -0 = +0); the kernels keep
    # IEEE's d * q sign, and both kernels' bits are compared with each other on the GPU.
    assert np.array_equal(got.astype(np.float64), ref)
    if edge:
        assert np.isinf(ref).any()  # overflowing scales really overflow
        tiny = np.abs(ref[(ref != 0) & np.isfinite(ref)])
        assert np.any(tiny < 2.0 ** -14)  # and subnormal results occur


def test_edge_cases_allow_infinities_and_seeded_ones_do_not():
    assert FAMILY.allows_nonfinite(FAMILY.path_case("q8_0", 4, 64, "edge:2", "vec16"), "y")
    assert not FAMILY.allows_nonfinite(FAMILY.path_case("q8_0", 4, 64, "seed:2", "vec16"), "y")


# --- GPU ----------------------------------------------------------------------------------------
