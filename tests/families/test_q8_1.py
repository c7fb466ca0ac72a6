"""q8_1 family: the numpy reference of quantize_q8_1_lane (its rounding rules) and the s tolerance."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.families import load_builtin_families
from strata_bench.families import q8_1 as mod
from strata_bench.kit import butterfly_sum_f32, quantize_q8_1, unpack_q8_1

FAMILY = load_builtin_families()["q8_1"]


def _slow_block(x: np.ndarray) -> tuple[float, list[int]]:
    """One block the slow way: Python floats for the comparisons, float32 for the divisions."""
    amax = max(abs(float(v)) for v in x)
    d = np.float32(np.float32(amax) / np.float32(127))
    q = []
    for v in x:
        if amax == 0:
            q.append(0)
            continue
        r = float(np.float32(v) / d)
        q.append(int(np.sign(r) * np.floor(abs(r) + 0.5)))  # half away from zero, exact in float64
    return float(np.float16(d)), q


@pytest.mark.parametrize("case", list(FAMILY.default_cases()), ids=lambda c: c.name)
def test_numpy_reference_matches_a_slow_loop(case):
    host = FAMILY.make_inputs(case)
    d, _, q = unpack_q8_1(host["q8"])
    x = host["x"].reshape(case.rows, -1, 32)
    for r in range(case.rows):
        for b in range(min(x.shape[1], 12)):
            d_slow, q_slow = _slow_block(x[r, b])
            assert d[r, b] == d_slow and q[r, b].tolist() == q_slow, (r, b)


def test_edge_blocks_hit_the_rounding_rules():
    case = next(c for c in FAMILY.default_cases() if c.data == "edge:3")
    host = FAMILY.make_inputs(case)
    d, _, q = unpack_q8_1(host["q8"])
    assert d[0, 0] == 0 and not q[0, 0].any()  # all-zero block
    assert d[0, 2] == 0  # 1e-30 values: d = amax/127 underflows fp16 to 0 (the codes still use the fp32 d)
    ties = q[0, 3]
    assert ties[0] == -127 and ties[1] == -15 and ties[-1] == 16  # -14.5 -> -15, 15.5 -> 16: away from zero
    assert 0 < d[0, 4] < 2.0 ** -14  # an fp16-subnormal scale


def test_tiny_block_codes_use_the_fp32_scale():
    # d = amax/127 ~ 8e-33 is representable in fp32, so the codes are full-range even though fp16(d) = 0.
    case = next(c for c in FAMILY.default_cases() if c.data == "edge:3")
    _, _, q = unpack_q8_1(FAMILY.make_inputs(case)["q8"])
    assert np.abs(q[0, 2]).max() == 127


def test_s_is_the_fp16_of_the_butterfly_sum():
    x = np.random.default_rng(4).standard_normal((3, 64), dtype=np.float32)
    _, s, _ = unpack_q8_1(quantize_q8_1(x))
    assert np.array_equal(s, butterfly_sum_f32(x.reshape(3, 2, 32)).astype(np.float16).astype(np.float64))


def test_s_tolerance_bounds_the_butterfly_and_is_tight():
    x = np.random.default_rng(5).standard_normal((50, 32), dtype=np.float32) * np.float32(100)
    s = butterfly_sum_f32(x).astype(np.float16).astype(np.float64)
    err = np.abs(s - x.astype(np.float64).sum(axis=1)).max()
    tol = mod.s_tolerance(x)
    assert err <= tol < 1.0  # fp16 of sums of a few hundred: half-ulp 0.125 .. 0.25


def test_references_and_outputs():
    case = next(iter(FAMILY.default_cases()))
    host = FAMILY.make_inputs(case)
    refs = FAMILY.reference(case, host)
    assert {r.output for r in refs} == {"q8", "d_bits", "qs", "s"}
    assert all(r.tol == 0.0 for r in refs if r.label != "f64 sum")
    assert [r for r in refs if r.label == "f64 sum"][0].tol > 0
    assert FAMILY.bytes_moved(case) == 2560 * 4 + 80 * 36
