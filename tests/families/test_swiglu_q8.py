"""swiglu_q8 family: compile, cases, layouts, derived outputs and the float64 reference's tolerances."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.families import load_builtin_families
from strata_bench.families import swiglu_q8 as mod
from strata_bench.kit import dequantize_q8_1, quantize_q8_1, unpack_q8_1

FAMILY = load_builtin_families()["swiglu_q8"]


def test_cases_cover_rows_down_types_and_layouts():
    cases = list(FAMILY.default_cases())
    combos = {(c.rows, c.fmt, c.param("layout")) for c in cases}
    assert combos == {(t, f, lay) for t in (1, 37, 4113) for f in ("q2_0", "iq4_nl", "q8_0")
                      for lay in ("split", "concat")}
    assert {c.rows for c in cases if c.data.startswith("edge")} == {1, 37}
    # the fused kernel's last warp with fewer than its 4 blocks: one case, 37 rows x 33 blocks
    assert [c.name for c in cases if c.rows * c.cols // 32 % mod.BLOCKS_PER_WARP] == \
        ["swiglu_q8/q8_0/37x1056/n1/seed:3/layout=split"]
    for c in cases:
        assert c.cols % mod.GRANULE[c.fmt] == 0


def test_bad_width_for_the_down_type_is_an_input_error():
    from strata_bench.cases import Case
    from strata_bench.errors import InputError

    with pytest.raises(InputError, match="multiple of 64"):
        FAMILY.make_inputs(Case("swiglu_q8", "q2_0", 2, 96, 1, "seed:1", params=(("layout", "split"),)))


def test_edge_rows_hold_a_zero_row_and_the_outlier():
    host = FAMILY.make_inputs(FAMILY.rows_case("q8_0", 37, "edge:2", "split"))
    assert not host["gate"][0].any() and not host["up"][0].any()
    assert host["gate"][-1, 5] * host["up"][-1, 5] == 3e4
    ref = mod.swiglu_reference(host["gate"], host["up"])
    assert ref["h"][-1, 5] == 3e4 and ref["h"][-1, 40] == 0.0 and np.signbit(ref["h"][-1, 40])


def test_concat_layout_passes_up_as_the_second_half_of_each_row():
    case = FAMILY.rows_case("q2_0", 3, "seed:1", "concat")
    host = FAMILY.make_inputs(case)
    both = np.concatenate([host["gate"], host["up"]], axis=1)
    gate, up, ld = mod.SwigluQ8._gate_up(case, {"gate_up": both})
    assert ld == 2 * case.cols
    assert np.array_equal(gate[:, : case.cols], host["gate"]) and np.array_equal(up, host["up"])
    assert np.shares_memory(up, both) and up.ctypes.data == both.ctypes.data + 4 * case.cols


def test_output_values_decode_the_q8_1_bytes():
    x = np.random.default_rng(3).standard_normal((2, 64), dtype=np.float32)
    raw = quantize_q8_1(x)
    assert np.array_equal(FAMILY.output_values(None, "q:values", {"q": raw}), dequantize_q8_1(raw))
    assert np.array_equal(FAMILY.output_values(None, "q:sums", {"q": raw}), unpack_q8_1(raw)[1])


def test_describe_index_names_the_q8_1_field():
    case = FAMILY.rows_case("q8_0", 2, "seed:1", "split")
    assert "field d" in FAMILY.describe_index(case, "q", (1, 36))
    assert "field qs[3]" in FAMILY.describe_index(case, "q", (0, 7))


@pytest.mark.parametrize("data", ["seed:1", "edge:2"])
def test_tolerances_cover_fp32_quantization_and_are_not_vacuous(data):
    host = FAMILY.make_inputs(FAMILY.rows_case("iq4_nl", 37, data, "split"))
    ref = mod.swiglu_reference(host["gate"], host["up"])
    assert 0 < ref["tol_values"] < np.inf and 0 < ref["tol_sums"] < np.inf
    h32 = ref["h"].astype(np.float32)  # an fp32 h within the contract's bound
    raw = quantize_q8_1(h32)
    blocks = np.abs(dequantize_q8_1(raw) - ref["h"]).reshape(37, -1, 32)
    assert (blocks <= ref["bound_values"][..., None]).all()  # every value within its block's own bound
    assert (np.abs(unpack_q8_1(raw)[1] - ref["sums"]) <= ref["bound_sums"]).all()
    assert (ref["bound_values"].max(), ref["bound_sums"].max()) == (ref["tol_values"], ref["tol_sums"])
    # Not vacuous: the bound stays below 0.6 code steps of the largest block, so a code off by two there
    # (an error of at least 1.5 d) fails it, as does a wrong scale.
    d = unpack_q8_1(raw)[0]
    assert ref["tol_values"] < 0.6 * d.max()


def test_reference_checks_values_and_sums_through_output_values():
    case = FAMILY.rows_case("q8_0", 37, "edge:2", "concat")
    host = FAMILY.make_inputs(case)
    exps = FAMILY.reference(case, host)
    assert {e.output for e in exps} == {"q:values", "q:sums"}
    # the cached reference (host is the cached draw) equals a fresh one from copies of the inputs
    fresh = FAMILY.reference(case, {k: v.copy() for k, v in host.items()})
    for a, b in zip(exps, fresh):
        assert np.array_equal(a.tol, b.tol) and np.array_equal(a.ref, b.ref)
    # and an fp32 emulation of the device output passes every check the engine would make
    raw = quantize_q8_1(mod.swiglu_reference(host["gate"], host["up"])["h"].astype(np.float32))
    for exp in exps:
        got = FAMILY.output_values(case, exp.output, {"q": raw})
        assert got.shape == exp.ref.shape == exp.tol.shape and (np.abs(got - exp.ref) <= exp.tol).all()
