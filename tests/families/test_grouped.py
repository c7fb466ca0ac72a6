"""grouped family: compile, case matrix (24 pairings, 9 uneven groups; 8 with experts over 8 entries), and the
float64 tolerances checked against the kernels' dot arithmetic run on the CPU (tests/iq_host) with a float32
SwiGLU."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from strata_bench.families import load_builtin_families
from strata_bench.families import grouped as mod
from strata_bench.kit import quantize_q8_1

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from iq_host import harness

FAMILY = load_builtin_families()["grouped"]


def test_default_cases_are_the_24_pairings_over_uneven_groups_then_8_with_experts_over_8_entries():
    cases = list(FAMILY.default_cases())
    assert len(cases) == 32
    assert [(c.fmt, c.param("down")) for c in cases[:24]] == [(g, d) for g in mod.GATE_FORMATS
                                                              for d in mod.DOWN_FORMATS]
    for case in cases[:24]:
        groups = mod.groups_of(case)
        assert len(groups) == 9 and sum(groups) == 35 == case.ncols and max(groups) == 8
        assert 0 in groups and 1 in groups and len(set(groups)) > 3
    assert {c.fmt for c in cases[24:]} == set(mod.GATE_FORMATS)
    for case in cases[24:]:
        assert mod.groups_of(case) == (11, 0, 1, 17, 3, 9) and (case.rows, case.cols) == (768, 1280)
    assert all(case.variants == ("old", "new") for case in cases)
    bench = list(FAMILY.bench_cases())
    assert {mod.groups_of(c)[0] for c in bench} == {8, 32}


def test_bench_cases_touch_at_least_4x_the_h200_l2_with_8_and_32_entries_per_expert():
    from strata_bench.formats import get_format

    l2 = 60 * 2**20  # the H200's L2
    bench = list(FAMILY.bench_cases())
    assert len(bench) == 2 * len(mod.BENCH_PAIRS)
    assert sorted({mod.groups_of(c) for c in bench}) == [(8,) * 8, (32,) * 8]
    for case in bench:
        weights = 8 * (2 * case.rows * get_format(case.fmt).bytes_per_row(case.cols)
                       + case.cols * get_format(case.param("down")).bytes_per_row(case.rows))
        assert weights >= 4 * l2, case.name
        assert weights < FAMILY.bytes_moved(case) < weights * 1.15  # + q8_1 and fp32 activations (12% at 256 q2_0 entries)
    smallest = min(bench, key=FAMILY.bytes_moved)
    assert (smallest.fmt, smallest.ncols, FAMILY.bytes_moved(smallest)) == ("q2_0", 64, 408_453_120)


def test_bad_groups_are_input_errors():
    from strata_bench.errors import InputError

    case = FAMILY.expert_case("iq2_xxs", "iq4_nl", 512, 1024, (3, 2), "seed:1")
    with pytest.raises(InputError):
        mod.groups_of(case.__class__(**{**case.__dict__, "ncols": 6}))


def _silu_mul_f32(g: np.ndarray, u: np.ndarray) -> np.ndarray:
    """grouped.cu's silu_mul in float32 (numpy's expf stands in for CUDA's; both within 2 ulp)."""
    g = g.astype(np.float32)
    with np.errstate(over="ignore"):
        return (g / (np.float32(1) + np.exp(-g))) * u.astype(np.float32)


@pytest.mark.parametrize("gate,down", [("iq2_xxs", "iq4_nl"), ("iq1_m", "q2_0"), ("q2_0", "iq4_xs"),
                                       ("iq3_s", "iq4_nl")])
def test_kernel_arithmetic_is_within_the_tolerances(gate, down):
    groups = (2, 0, 1, 3)
    case = FAMILY.expert_case(gate, down, 256, 512, groups, "seed:4")
    host = FAMILY.make_inputs(case)
    x8 = quantize_q8_1(host["x"])
    h = np.zeros((case.ncols, 256), np.float32)
    y = np.zeros((case.ncols, 512), np.float32)
    start = 0
    for e, size in enumerate(groups):
        if size:
            rows = slice(start, start + size)
            g = harness.run_dot(gate, host["gate"]["raw"][e], 512, x8[rows])
            u = harness.run_dot(gate, host["up"]["raw"][e], 512, x8[rows])
            h[rows] = _silu_mul_f32(g, u)
            y[rows] = harness.run_dot(down, host["down"]["raw"][e], 256, quantize_q8_1(h[rows]))
        start += size
    for ref in FAMILY.reference(case, host):
        got = h if ref.output == "H" else y
        err = np.abs(got.astype(np.float64) - ref.ref)
        assert ref.tol.shape == err.shape  # each element its own bound
        assert (err <= ref.tol).all(), f"{ref.output} {ref.label}: worst |err|/bound {(err / ref.tol).max():.3g}"


def test_swiglu_bound_covers_perturbed_inputs():
    rng = np.random.default_rng(2)
    g, u = rng.standard_normal(1000) * 4, rng.standard_normal(1000) * 4
    bg, bu = np.full(1000, 1e-3), np.full(1000, 1e-3)
    worst = np.zeros(1000)
    for sg in (-1, 1):
        for su in (-1, 1):
            worst = np.maximum(worst, np.abs(mod.silu(g + sg * bg) * (u + su * bu) - mod.silu(g) * u))
    assert (worst <= mod.swiglu_bound(g, u, bg, bu)).all()


def test_describe_index_names_the_expert():
    case = next(iter(FAMILY.default_cases()))  # groups 5-0-1-8-...: entry 6 is expert 3's first
    assert FAMILY.describe_index(case, "H", (6, 10)) == "entry 6 (expert 3), f 10"
    assert FAMILY.describe_index(case, "Y", (5, 2)) == "entry 5 (expert 2), o 2"
