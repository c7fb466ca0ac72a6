"""moe_combine family: compile, cases, padding, the float64 reference against a slow loop, and an fp32
emulation of the contract's operation order within every tolerance."""
from __future__ import annotations

import math

import numpy as np
import pytest

from strata_bench.cases import Case

from strata_bench.families import load_builtin_families
from strata_bench.families import moe_combine as mod
from strata_bench.kit import butterfly_sum_f32

FAMILY = load_builtin_families()["moe_combine"]


def test_cases_cover_token_counts_lo_and_a_padded_stride():
    cases = list(FAMILY.default_cases())
    assert {c.rows for c in cases} == {1, 333, 1000, 517, 3}
    assert {bool(c.param("lo")) for c in cases} == {True, False}
    # every fused instance runs: H = 256 x EPT for each EPT, with and without xn16_lo
    assert {(c.cols // 256, bool(c.param("lo"))) for c in cases} == {(e, lo) for e in mod.FUSED_EPT for lo in (0, 1)}
    padded = [c for c in cases if c.param("ld", c.cols) > c.cols]
    assert padded and all(c.rows == 517 for c in padded)
    assert {bool(c.param("lo")) for c in padded} == {True, False}


def _small(tokens=3, hidden=256, topk=2, ld=None, data="seed:7", lo=True) -> Case:
    return FAMILY.tokens_case(tokens, data, lo, hidden=hidden, topk=topk, ld=ld)


def test_input_padding_is_nan_and_output_padding_is_masked():
    case = _small(ld=300)
    host = FAMILY.make_inputs(case)
    for name in ("Y", "S", "R_in"):
        assert np.isnan(host[name][..., 256:]).all() and np.isfinite(host[name][..., :256]).all()
    mask = FAMILY.written_mask(case, "R_out")
    assert mask.shape == (4, 3, 300) and mask[..., :256].all() and not mask[..., 256:].any()
    assert FAMILY.written_mask(case, "rs") is None
    exps = {e.output: e for e in FAMILY.reference(case, host)}
    assert np.isnan(exps["xn16"].ref[:, 256:]).all() and np.isnan(exps["R_out"].ref[..., 256:]).all()


def test_reference_matches_a_slow_loop():
    case = _small()
    host = FAMILY.make_inputs(case)
    ref = mod.moe_reference(host, 256, mod.DEFAULT_EPS)
    w, y, s, r_in = host["w"], host["Y"], host["S"], host["R_in"]
    for t in range(3):
        c = [sum(float(w[t, k]) * float(y[t, k, i]) for k in range(2)) + float(s[t, i]) for i in range(256)]
        r = [[float(r_in[j, t, i]) + float(host["beta"][j, t]) * c[i] for i in range(256)] for j in range(4)]
        x = [sum(float(host["alpha"][j, t]) * r[j][i] for j in range(4)) for i in range(256)]
        rs = 1 / math.sqrt(sum(v * v for v in x) / 256 + mod.DEFAULT_EPS)
        assert ref["rs"][t] == pytest.approx(rs, rel=1e-13)
        assert np.allclose(ref["R"][:, t], np.array(r), rtol=1e-13, atol=1e-13)
        assert np.allclose(ref["y"][t], np.array(x) * rs * host["g"], rtol=1e-12, atol=1e-13)


def fma32(a, b, c):
    return (np.asarray(a, np.float64) * np.asarray(b, np.float64) + c).astype(np.float32)


def emulate(host, hidden, eps):
    """The contract's fp32 operation order (fma through float64: exact products, then one rounding)."""
    w, y, s, r_in = host["w"], host["Y"][..., :hidden], host["S"][..., :hidden], host["R_in"][..., :hidden]
    beta, alpha, g = host["beta"], host["alpha"], host["g"]
    c = (w[:, 0, None] * y[:, 0]).astype(np.float32)
    for k in range(1, w.shape[1]):
        c = fma32(w[:, k, None], y[:, k], c)
    c = (c + s).astype(np.float32)
    r = np.stack([fma32(beta[j][:, None], c, r_in[j]) for j in range(4)])
    x = (alpha[0][:, None] * r[0]).astype(np.float32)
    for j in range(1, 4):
        x = fma32(alpha[j][:, None], r[j], x)
    tokens = x.shape[0]
    acc = np.zeros((tokens, 256), np.float32)
    for m in range(hidden // 256):
        acc = fma32(x[:, 256 * m: 256 * (m + 1)], x[:, 256 * m: 256 * (m + 1)], acc)
    warp = butterfly_sum_f32(acc.reshape(tokens, 8, 32))
    tot = warp[:, 0]
    for k in range(1, 8):
        tot = (tot + warp[:, k]).astype(np.float32)
    v = ((tot / np.float32(hidden)).astype(np.float32) + np.float32(eps)).astype(np.float32)
    rs = (1 / np.sqrt(v.astype(np.float64))).astype(np.float32)
    yv = ((x * rs[:, None]).astype(np.float32) * g).astype(np.float32)
    hi = yv.astype(np.float16)
    return r, rs, hi, (yv - hi.astype(np.float32)).astype(np.float16)


@pytest.mark.parametrize("data", ["seed:7", "edge:8"])
def test_fp32_emulation_is_within_every_tolerance(data):
    case = _small(tokens=5, hidden=512, topk=8, data=data)
    host = FAMILY.make_inputs(case)
    ref = mod.moe_reference(host, 512, mod.DEFAULT_EPS)
    r, rs, hi, lo = emulate(host, 512, mod.DEFAULT_EPS)
    # every element within its own bound
    assert (np.abs(r - ref["R"]) <= ref["bound_R"]).all()
    assert (np.abs(rs - ref["rs"]) <= ref["bound_rs"]).all()
    assert (np.abs(hi - ref["y"]) <= ref["bound_xn"]).all()
    pair = hi.astype(np.float64) + lo.astype(np.float64)
    assert (np.abs(pair - ref["y"]) <= ref["bound_pair"]).all()
    assert ref["tol_R"] == ref["bound_R"].max() and ref["tol_pair"] == ref["bound_pair"].max()
    assert ref["tol_pair"] < ref["tol_xn"] / 16  # the lo half really adds precision
    if data.startswith("edge"):
        assert rs[0] == np.float32(1 / np.sqrt(np.float64(np.float32(mod.DEFAULT_EPS)))) and not hi[0].any()


def test_derived_output_is_hi_plus_lo():
    outs = {"xn16": np.array([1.0, -2.0], np.float16), "xn16_lo": np.array([2.0 ** -12, 0.0], np.float16)}
    assert FAMILY.output_values(None, "xn16+lo", outs).tolist() == [1.0 + 2.0 ** -12, -2.0]
    # The hi+lo pair is checked exactly when the case writes xn16_lo, and only then.
    with_lo = FAMILY.reference(_small(lo=True), FAMILY.make_inputs(_small(lo=True)))
    without_lo = FAMILY.reference(_small(lo=False), FAMILY.make_inputs(_small(lo=False)))
    assert [e.output for e in with_lo] == ["R_out", "rs", "xn16", "xn16+lo"]
    assert [e.output for e in without_lo] == ["R_out", "rs", "xn16"]
    case = _small(ld=272)
    host = FAMILY.make_inputs(case)
    exps = {e.output: e for e in FAMILY.reference(case, host)}
    assert set(exps) == {"R_out", "rs", "xn16", "xn16+lo"}
    r, rs, hi, lo = emulate(host, 256, mod.DEFAULT_EPS)
    pad = lambda a: mod._padded(a, 272, fill=np.nan)  # unwritten padding reads as poison NaN
    got = FAMILY.output_values(case, "xn16+lo", {"xn16": pad(hi.astype(np.float32)).astype(np.float16),
                                                  "xn16_lo": pad(lo.astype(np.float32)).astype(np.float16)})
    ref = exps["xn16+lo"].ref
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    assert exps["xn16+lo"].tol.shape == ref.shape
    assert (np.abs(got - ref)[~np.isnan(ref)] <= exps["xn16+lo"].tol[~np.isnan(ref)]).all()


def test_cases_with_and_without_lo_share_one_draw_and_reference():
    a, b = FAMILY.tokens_case(517, "seed:4", True, ld=2112), FAMILY.tokens_case(517, "seed:4", False, ld=2112)
    assert FAMILY.make_inputs(a) is FAMILY.make_inputs(b)
    ra, rb = FAMILY.reference(a, FAMILY.make_inputs(a)), FAMILY.reference(b, FAMILY.make_inputs(b))
    assert np.array_equal(ra[0].tol, rb[0].tol) and np.array_equal(ra[2].ref, rb[2].ref, equal_nan=True)


def test_launch_needs_a_fused_instance_for_the_shape():
    from strata_bench.errors import InputError

    with pytest.raises(InputError, match="fused instance"):
        FAMILY.launch(_small(topk=2), "new", None, {}, {"xn16_lo": None})


def test_bytes_moved_counts_every_stream_once():
    case = FAMILY.tokens_case(1000, "seed:1", False)
    t, h, k = 1000, 2048, 8
    expected = 4 * (t * k + t * k * h + t * h + 8 * t + h + 4 * t * h) + 4 * (4 * t * h + t) + 2 * t * h
    assert FAMILY.bytes_moved(case) == expected
