"""q2warp family: kernel compile, cases, host q8_1, references against slow loops, and host emulations of
the new kernel's byte staging and half-block order (the parts of its bitwise argument that are index math)."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from strata_bench.families import load_builtin_families
from strata_bench.families import q2warp as mod
from strata_bench.kit import butterfly_sum_f32, roundf, unpack_q8_1

FAMILY = load_builtin_families()["q2warp"]


# --- compile ------------------------------------------------------------------------------------


# --- cases --------------------------------------------------------------------------------------
def test_default_cases_cover_the_issue():
    cases = list(FAMILY.default_cases())
    attn = sorted(c.ncols for c in cases if (c.rows, c.cols) == (12288, 2560))
    assert attn == [1, 2, 3, 4]
    uneven = [c for c in cases if c.rows % 4 and (c.cols // 64) % 2]
    assert {c.ncols for c in uneven if (c.rows, c.cols) == (1001, 2496)} == {1, 2, 3, 4}
    assert any(c.data.startswith("edge") for c in cases)
    assert any(c.data.startswith("fixture") for c in cases)
    assert all(c.variants == ("old", "new") for c in cases)
    bench = list(FAMILY.bench_cases())
    assert {(c.rows, c.cols) for c in bench} == {(12288, 2560), (131072, 8192)}


def test_bytes_moved_counts_weights_activations_and_outputs():
    case = FAMILY.case("q2_0", 12288, 2560, 2, "seed:1")
    assert FAMILY.bytes_moved(case) == 12288 * 40 * 18 + 2 * 80 * 36 + 2 * 12288 * 4


def test_related_case_is_the_one_column_call():
    case = FAMILY.case("q2_0", 1001, 2496, 3, "seed:2")
    ((other, output, select),) = FAMILY.related_cases(case)
    assert other.ncols == 1 and output == "y"
    assert select({"y": np.arange(3 * 5).reshape(3, 5)}).tolist() == [[0, 1, 2, 3, 4]]
    # and column 0 of the activations really is shared
    x3 = mod._activations(2496, 3, 2, edge=False)
    x1 = mod._activations(2496, 1, 2, edge=False)
    assert np.array_equal(x3[0], x1[0])


# --- host q8_1 ------------------------------------------------------------------------------------
def test_roundf_is_half_away_from_zero_without_double_rounding():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, np.nextafter(np.float32(0.5), np.float32(0))], dtype=np.float32)
    assert roundf(x).tolist() == [1.0, 2.0, 3.0, -1.0, -3.0, 0.0]


# --- references ----------------------------------------------------------------------------------
def test_decode_matches_the_format_oracle():
    from strata_bench.data.synthetic import synthetic_weights
    from strata_bench.formats import get_format

    raw = synthetic_weights("q2_0", 5, 192, seed=3, edge=True)
    levels, d = mod.decode_q2_0(raw, 5, 3)
    values = (levels.astype(np.float64) * np.repeat(d, 2, axis=1)[..., None]).reshape(5, 192)
    assert np.array_equal(values, get_format("q2_0").dequantize_f64(raw))


def test_reference_matches_a_slow_exact_loop():
    case = FAMILY.case("q2_0", 7, 192, 3, "edge:6")
    host = FAMILY.make_inputs(case)
    ref = mod.q2_reference(host["w"], host["x"], host["act"], 7, 192)
    d_a, _, q_a = unpack_q8_1(host["act"])
    blocks = host["w"].reshape(7, 3, 18)
    for row in range(7):
        for col in range(3):
            total = Fraction(0)
            for h in range(6):
                blk = blocks[row, h // 2]
                d_w = Fraction(float(blk[:2].view(np.float16)[0]))
                s_h = 0
                for i in range(32):
                    j = 32 * (h % 2) + i
                    code = (int(blk[2 + j % 16]) >> (2 * (j // 16))) & 3
                    s_h += (2 * code - 3) * int(q_a[col, h, i])
                total += d_w * Fraction(float(d_a[col, h])) * s_h
            assert ref["y_q"][col, row] == pytest.approx(float(total), rel=1e-15, abs=1e-300)
    levels, d_w = mod.decode_q2_0(host["w"], 7, 3)
    w64 = (levels.astype(np.float64) * np.repeat(d_w, 2, axis=1)[..., None]).reshape(7, 192)
    assert np.allclose(ref["y_raw"], (w64 @ host["x"].astype(np.float64).T).T, rtol=1e-13)


@pytest.mark.parametrize("ncols", [1, 3])
def test_column_sliced_reference_equals_a_direct_one(ncols):
    case = FAMILY.case("q2_0", 1001, 2496, ncols, "edge:3")
    host = FAMILY.make_inputs(case)
    sliced = {e.label: e for e in FAMILY.reference(case, host)}
    direct = mod.q2_reference(host["w"], host["x"], host["act"], 1001, 2496)
    # BLAS may round a float64 product differently for another column count: equal to ~1 ulp.
    assert np.allclose(sliced["f64(q8_1 acts)"].ref, direct["y_q"], rtol=1e-14, atol=0)
    assert np.allclose(sliced["f64(raw acts)"].ref, direct["y_raw"], rtol=1e-12, atol=1e-12)
    assert np.allclose(sliced["f64(q8_1 acts)"].tol, direct["bound_q"], rtol=1e-12, atol=0)
    assert np.allclose(sliced["f64(raw acts)"].tol, direct["bound_raw"], rtol=1e-12, atol=0)


def test_tolerances_are_positive_finite_and_cover_an_fp32_emulation():
    case = FAMILY.case("q2_0", 13, 8320, 3, "seed:4")
    host = FAMILY.make_inputs(case)
    ref = mod.q2_reference(host["w"], host["x"], host["act"], 13, 8320)
    assert 0 < ref["tol_q"] < ref["tol_raw"] < np.inf
    y = emulate_old(host["w"], host["act"], 13, 8320 // 64, 3)
    assert (ref["bound_q"].max(), ref["bound_raw"].max()) == (ref["tol_q"], ref["tol_raw"])
    assert (np.abs(y - ref["y_q"]) <= ref["bound_q"]).all()  # every output within its own bound
    assert (np.abs(y - ref["y_raw"]) <= ref["bound_raw"]).all()
    # and the tolerance is not vacuous: a 1% error breaks it
    assert np.abs(y * 1.01 - ref["y_q"]).max() > ref["tol_q"]


def emulate_old(raw, act, rows, nb, ncols):
    """The exact layout's float arithmetic in numpy (fma emulated through float64: exact products)."""
    nh = 2 * nb
    levels, d_w = mod.decode_q2_0(raw, rows, nb)
    d_a, _, q_a = unpack_q8_1(act)
    s = np.einsum("rhi,chi->rch", levels.astype(np.int64), q_a.astype(np.int64))
    f = (np.repeat(d_w, 2, axis=1)[:, None, :].astype(np.float32) * d_a[None].astype(np.float32))
    acc = np.zeros((rows, ncols, 128), np.float32)
    for h in range(nh):
        t = h % 128
        acc[:, :, t] = (f[:, :, h].astype(np.float64) * s[:, :, h] + acc[:, :, t]).astype(np.float32)
    part = acc.reshape(rows, ncols, 4, 32)
    tot = part[:, :, 0]
    for w in range(1, 4):
        tot = (tot + part[:, :, w]).astype(np.float32)
    return butterfly_sum_f32(tot).T


# --- the new kernel's index math, emulated --------------------------------------------------------
SLOT = 20  # granules per staged row (q2warp.cu kSlotGranules)


def stage_and_decode(buf: np.ndarray, base: int, rows: int, nb: int, row0: int, g: int, lane: int):
    """q2warp_new's stage_load/stage_store + staged_block for one lane, over a byte buffer whose element 0
    sits at device address `base`: returns [(d bits, qs words)] for the four rows (None past `rows`)."""
    slots = np.zeros(4 * SLOT * 16, np.uint8)
    length = min(16, nb - 16 * g) * 18
    for idx in range(96):  # every lane's three slots
        r, k = divmod(idx, SLOT)
        if r < 4 and row0 + r < rows:
            start = base + (row0 + r) * nb * 18 + g * 288
            head = start & 15
            if k < (head + length + 15) >> 4:
                src = start - head + 16 * k - base
                for b in range(16):  # bytes outside the buffer stand for other data: fill 0xEE
                    slots[idx * 16 + b] = buf[src + b] if 0 <= src + b < len(buf) else 0xEE
    words = slots.view("<u4")
    out = []
    for r in range(4):
        if row0 + r >= rows:
            out.append(None)
            continue
        head = (base + (row0 + r) * nb * 18 + g * 288) & 15
        o = r * SLOT * 16 + head + (lane >> 1) * 18
        wd = [int(words[(o >> 2) + i]) for i in range(5)]
        sh = (o & 3) * 8

        def funnel(lo, hi, shift):
            return hi if shift >= 32 else ((lo >> shift) | (hi << (32 - shift))) & 0xFFFFFFFF if shift else lo

        qs = [funnel(wd[i], wd[i + 1], 16 + sh) for i in range(4)]
        out.append((funnel(wd[0], wd[1], sh) & 0xFFFF, qs))
    return out


@pytest.mark.parametrize("nb,rows,base", [(39, 6, 0), (39, 6, 2), (40, 5, 14), (3, 7, 6), (130, 4, 10)])
def test_staged_bytes_decode_to_each_lanes_block(nb, rows, base):
    rng = np.random.default_rng(nb + rows + base)
    buf = rng.integers(0, 256, rows * nb * 18, dtype=np.uint8)
    for row0 in range(0, rows, 4):
        for g in range(math.ceil(2 * nb / 32)):
            for lane in range(32):
                if 32 * g + lane >= 2 * nb:
                    continue
                got = stage_and_decode(buf, base, rows, nb, row0, g, lane)
                for r in range(4):
                    if row0 + r >= rows:
                        continue
                    blk = buf[((row0 + r) * nb + 16 * g + lane // 2) * 18:][:18]
                    d_bits, qs = got[r]
                    assert d_bits == int(blk[:2].view("<u2")[0])
                    assert qs == [int(x) for x in blk[2:].view("<u4")]


def new_kernel_order(nh: int) -> dict[tuple[int, int], list[int]]:
    """Per (lane, chunk): the half-blocks q2warp_new accumulates, in order (its group walk)."""
    ngroups = math.ceil(nh / 32)
    nchunks = min(4, ngroups)
    order = {(lane, c): [] for lane in range(32) for c in range(4)}
    g = 0
    while g >= 0:
        chunk = g & 3
        ends = g + 4 >= ngroups
        nxt = g + 4 if not ends else (chunk + 1 if chunk + 1 < nchunks else -1)
        for lane in range(32):
            if 32 * g + lane < nh:
                order[(lane, chunk)].append(32 * g + lane)
        g = nxt
    return order


@pytest.mark.parametrize("nh", [2, 6, 32, 78, 80, 96, 128, 130, 256, 260])
def test_new_kernel_gives_each_lane_chunk_the_old_threads_half_blocks_in_order(nh):
    order = new_kernel_order(nh)
    for lane in range(32):
        for chunk in range(4):
            old_thread = 32 * chunk + lane
            assert order[(lane, chunk)] == list(range(old_thread, nh, 128))


def test_new_kernel_shared_bytes_cover_every_activation_byte():
    assert mod.new_kernel_shared_bytes(0x1000, 4, 128) == 4 * 256 * 36
    assert mod.new_kernel_shared_bytes(0x1004, 1, 1) == 80  # 4 + 72 bytes, rounded to granules


# --- GPU -----------------------------------------------------------------------------------------
