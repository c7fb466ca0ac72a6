"""The error model of pfgemm's variant ggml (ggml/mmq_error.py) on the CPU: the host's q8_1 of the activations
(ties and all-zero chunks), and the bound against an fp32 emulation of ggml's arithmetic with its fast-math
errors drawn at their bounds (d_inv 2 ulp off either way, d 1 ulp more): every output within its bound, the
device's codes different from the host's only where the model allows it, while one fp16 ulp on every weight
block's scale, or an all-zero output, falls outside."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.families import load_builtin_families
from strata_bench.families.pfgemm import expert_operands
from strata_bench.ggml.mmq_error import MmidErrorModel, pfgemm_bound, q8_1_mmq

PFGEMM = load_builtin_families()["pfgemm"]
F32 = np.float32


def test_the_host_quantization_marks_ties_and_leaves_zero_chunks_zero():
    x = np.zeros((2, 64), np.float16)
    x[0, :32] = np.linspace(-1, 1, 32).astype(np.float16)
    x[0, 0], x[0, 1], x[0, 2] = 2.0, 1.0, -1.0  # amax 2: 1.0 is 63.5 steps of 2/127, a tie of roundf
    x[1, 32:] = 0.25  # the other chunks stay zero
    quant = q8_1_mmq(x)
    d = 2.0 / 127
    assert quant.values[0, 0] == 127 * d and quant.values[0, 1] == 64 * d and quant.values[0, 2] == -64 * d
    assert quant.step[0, 1] == d and quant.step[0, 2] == d and quant.step[0, 0] == 0
    assert (quant.values[0, 32:] == 0).all() and (quant.step[0, 32:] == 0).all() and (quant.values[1, :32] == 0).all()
    np.testing.assert_array_equal(quant.values[1, 32:], 0.25)  # every value amax: code 127


def _device_quantization(x: np.ndarray, rng) -> tuple[np.ndarray, np.ndarray]:
    """quantize_mmq_q8_1 in fp32 with the fast-math errors drawn at their bounds: codes [n][k] and d [n][k/32]."""
    n, k = x.shape
    c = x.astype(F32).reshape(n, k // 32, 32)
    amax = np.abs(c).max(axis=2, keepdims=True)
    d_inv = (F32(127) / amax).astype(F32)
    for _ in range(2):  # div.approx: up to 2 ulp either way
        d_inv = np.where(rng.random(d_inv.shape) < 0.5, np.nextafter(d_inv, F32(0)), np.nextafter(d_inv, F32(np.inf)))
    p = (c * d_inv).astype(F32)
    q = np.copysign(np.floor(np.abs(p) + 0.5), p)
    d = np.nextafter((F32(1) / d_inv).astype(F32), F32(np.inf))  # the reciprocal one ulp off
    return q.reshape(n, k), d[..., 0]


def _weight_scales(fmt: str, raw: np.ndarray, up: bool = False) -> tuple[int, np.ndarray]:
    """The x_df mul_mat_q's tiles hold: iq4_nl d per 32 values, iq2_s ((ls + 1/2) d) / 4 per 16 values; `up`:
    with every block's fp16 d one ulp up."""
    rows = raw.shape[0]
    size, group = (18, 32) if fmt == "iq4_nl" else (82, 16)
    blocks = raw.reshape(rows, -1, size)
    d = blocks[..., :2].copy().view(np.float16)
    d = (np.nextafter(d, np.float16(np.inf)) if up else d).astype(np.float64)  # [rows][blocks][1]
    if fmt == "iq4_nl":
        return group, d[..., 0]
    scales = blocks[..., 74:82].astype(np.int64)  # after d, qs[64], qh[8]
    ls = np.stack([scales & 0xF, scales >> 4], axis=-1).reshape(rows, -1, 16)
    return group, ((ls * d + d / 2) / 4).reshape(rows, -1)


def _emulated(fmt: str, host, n: int, k: int, rng, scale_up: bool = False) -> np.ndarray:
    """ggml's sum in fp32, chunk by chunk in k order: exact int dots, then C*dA*dB (iq4_nl) or
    dB*(C0*dA0 + C1*dA1) (iq2_s), each operation rounded; the codes compared with the host's on the way."""
    out = np.zeros((int(host["offsets"][-1]), n))
    group, scales = _weight_scales(fmt, host["w"])
    moved_codes = 0
    for t0, t1, w, x in expert_operands(fmt, host["w"], host["x"], host["offsets"], n, k):
        e = int(np.searchsorted(host["offsets"], t0, side="right") - 1)
        d_w = np.repeat(scales[e * n:(e + 1) * n], group, axis=1)
        codes = np.divide(w, d_w, out=np.zeros_like(w), where=d_w != 0)  # a zero scale: zero weights
        assert (codes == np.round(codes)).all() and np.abs(codes).max() <= 127  # w = dA * an int8 code
        if scale_up:
            d_w = np.repeat(_weight_scales(fmt, host["w"], up=True)[1][e * n:(e + 1) * n], group, axis=1)
        q, d_x = _device_quantization(x, rng)
        host_q = q8_1_mmq(x)
        moved = np.abs(q * np.repeat(np.abs(x).reshape(len(x), -1, 32).max(axis=2) / 127, 32, axis=1)
                       - host_q.values) > 1e-12
        assert (host_q.step[moved] > 0).all()  # a code differs only where the model allows one
        moved_codes += int(moved.sum())
        acc = np.zeros((t1 - t0, n), F32)
        for c in range(k // 32):
            part = slice(c * 32, (c + 1) * 32)
            terms = [(q[:, h] @ codes[:, h].T) * d_w[:, h][:, 0] for h in _halves(part, group)]
            inner = F32(terms[0]) if len(terms) == 1 else (F32(terms[0]) + F32(terms[1])).astype(F32)
            acc = (acc + (inner * d_x[:, c:c + 1]).astype(F32)).astype(F32)
        out[t0:t1] = acc
    return out, moved_codes


def _halves(part: slice, group: int) -> list[slice]:
    return [part] if group == 32 else [slice(part.start, part.start + 16), slice(part.start + 16, part.stop)]


@pytest.mark.parametrize("fmt,n,k,groups,data", [
    ("iq4_nl", 144, 512, "0,1,15,16,17,33,64,4", "seed:9"),
    ("iq2_s", 256, 768, "70,0,3,129,0,16,48,1", "seed:3"),
    ("iq2_s", 256, 1536, "0,1,15,16,17,33,64,4", "fixture:smollm2-ffn_down.iq2_s"),
])
def test_ggmls_arithmetic_stays_within_the_bound_and_small_defects_do_not(fmt, n, k, groups, data):
    case = PFGEMM.expert_case(fmt, n, k, groups, data)
    host = PFGEMM.make_inputs(case)
    (exp,) = PFGEMM.reference(case, host)
    model = MmidErrorModel((fmt,))
    bound = model.bounds(case, host, exp, None)
    assert bound is model.bounds(case, host, exp, 1.0)  # computed once for ggml and ggml_b
    np.testing.assert_array_equal(bound, pfgemm_bound(fmt, host, n, k))
    rng, moved = np.random.default_rng(7), 0
    for _ in range(2):
        got, codes = _emulated(fmt, host, n, k, rng)
        err, moved = np.abs(got - exp.ref), moved + codes
        assert (err <= bound).all() and err.max() > 0
    assert moved > 0  # near-tie codes did move: the model's allowance for them was needed
    off = np.abs(_emulated(fmt, host, n, k, rng, scale_up=True)[0] - exp.ref)
    assert (off > bound).mean() > 0.25  # one fp16 ulp on every weight scale: 0.3-0.45 of these outputs
    assert (np.abs(exp.ref) > bound).mean() > 0.98  # an all-zero output fails all but the outputs near zero
    assert bound.max() < 0.01 * np.abs(exp.ref).max()


def test_the_model_judges_its_formats_alone():
    model = MmidErrorModel(("iq2_s", "iq4_nl"))
    assert model.applies("iq4_nl") and not model.applies("q2_0") and model.judges_baseline
    assert "q8_1 activations" in model.describe()
