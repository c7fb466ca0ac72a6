"""glu.py and swiglu_q8's variant ggml without a GPU: the SwiGLU launch (instance, grid, block, every argument,
for both layouts), the quantize_q8_1 launch after it, what a tree must have; the error model (swiglu_q8's
bounds with ggml's arithmetic) against float32 emulations of ggml's __expf, approximate divisions and
quantization at their documented worst errors; on the pinned real tree, the code paths the plans follow."""
from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from strata_bench.families.swiglu_q8 import H_REL, expected, swiglu_reference
from strata_bench.ggml import glu
from strata_bench.ggml.fusion_error import SwigluErrorModel, fast_q8_1_value_error, ggml_swiglu, swiglu_h_rel
from strata_bench.ggml.tree import QUANTIZE, locate
from strata_bench.ggml.variants import attach
from strata_bench.numerics.bounds import fp16_half_ulp, q8_1_value_error
from tests.ggml_trees import lacking_after

G, U, H = object(), object(), object()


def _values(launch):
    return {p.label: p.value for p in launch.params}


@pytest.mark.parametrize("rows,cols,ld,grid", [(37, 1408, 1408, 204), (37, 1408, 2816, 204), (1, 768, 768, 3),
                                               (4113, 1536, 1536, 24678)])
def test_the_gated_launch(rows, cols, ld, grid):
    launch = glu.plan(256, rows, cols, G, U, ld, H)
    assert launch.kernel == "unary_gated_op_kernel<&op_silu, float>"
    assert (launch.grid, launch.block) == ((grid, 1, 1), (256, 1, 1))  # ceil(rows * cols / 256)
    assert _values(launch) == {"x": G, "g": U, "dst": H, "k": rows * cols, "n": cols, "o0": ld, "o1": ld}
    assert [(p.label, p.ctype.name) for p in launch.params] == [
        ("x", "float*"), ("g", "float*"), ("dst", "float*"), ("k", "int64_t"), ("n", "int64_t"), ("o0", "int64_t"),
        ("o1", "int64_t")]


@pytest.mark.parametrize("where,old,new,line", [
    (glu.UNARY, "const int64_t o1)", "const int o1)",
     "src/ggml-cuda/unary.cu: unary_gated_op_kernel's parameters changed (an unsupported ggml version): "
     "(const T * x, const T * g, T * dst, const int64_t k, const int64_t n, const int64_t o0, const int o1)"),
    (glu.UNARY_CUH, "CUDA_GLU_BLOCK_SIZE 256", "CUDA_GLU_BLOCK_SIZE 4096",
     "src/ggml-cuda/unary.cuh defines no CUDA_GLU_BLOCK_SIZE in 32..1024, the block of unary_gated_op_kernel's launch "
     "(an unsupported ggml version?)"),
    (glu.UNARY, "ggml_cuda_cast<float>(g[j1]))", "ggml_cuda_cast<float>(g[j1]) * 2.0f)",
     f"src/ggml-cuda/unary.cu: op_silu or unary_gated_op_kernel's product is not the `{glu.OP_SILU[1]}` and "
     f"`{glu.PRODUCT}` swiglu_q8's error model bounds"),
    (glu.UNARY_CUH, "expf(-x)", "__expf(-x)",
     "src/ggml-cuda/unary.cuh: ggml_cuda_op_silu_single is not `return x / (1.0f + expf(-x));`, which swiglu_q8's "
     "error model bounds"),
])
def test_what_a_tree_lacks_is_named(fake_tree, where, old, new, line):
    assert lacking_after(fake_tree, glu.lacking, where, old, new) == line


def test_a_tree_held_to_anothers_bits_needs_no_bounded_arithmetic(fake_tree):
    path = fake_tree / glu.UNARY
    path.write_text(path.read_text().replace("ggml_cuda_cast<float>(g[j1]))", "ggml_cuda_cast<float>(g[j1]) * 2.0f)"))
    assert glu.lacking(locate(fake_tree)) is not None and glu.lacking(locate(fake_tree), bounded=False) is None


# --- the variant ------------------------------------------------------------------------------------------------
def _address(array):
    """The first element's address of a stand-in device array or a numpy array (a view's, not its base's)."""
    return array.data.ptr if hasattr(array.data, "ptr") else array.__array_interface__["data"][0]


def _device(names):
    """Stand-ins of device arrays: a launch passes them as they are."""
    return {k: SimpleNamespace(data=SimpleNamespace(ptr=4096 * (i + 1))) for i, k in enumerate(names)}


@pytest.mark.parametrize("layout", ["split", "concat"])
def test_the_launch_is_the_swiglu_then_quantize_q8_1(families, fake_tree, layout):
    tree = locate(fake_tree)
    attach(families, tree)
    family = families["swiglu_q8"]
    variant = family.variant("ggml")
    gated, quantize = f"{tree.path(glu.UNARY)}@ggml", f"{tree.path(QUANTIZE)}@ggml"
    assert (variant.kernels(family, gated), variant.kernels(family, quantize)) == ([glu.NAME], ["quantize_q8_1"])
    assert variant.kernels(family, family.sources[0]) == [] and isinstance(variant.error_model, SwigluErrorModel)
    case = family.rows_case("iq4_nl", 37, "seed:1", layout)
    assert family.runs(variant, case)
    calls = []

    def in_source(unit, name):
        return lambda grid, block, args, stream=None: calls.append((unit, name, grid, block, args))

    if layout == "split":
        dev = _device(("gate", "up", "h"))
        gate, up, ld = dev["gate"], dev["up"], 1408
    else:
        both = np.zeros((37, 2 * 1408), np.float32)
        dev = {"gate_up": both, **_device(("h",))}
        gate, up, ld = both, both[:, 1408:], 2 * 1408
    outs = _device(("q",))
    variant.launch(family, case, SimpleNamespace(in_source=in_source), dev, outs)
    (u1, n1, grid1, block1, a1), (u2, n2, grid2, block2, a2) = calls
    assert (u1, n1, grid1, block1) == (gated, glu.NAME, (204, 1, 1), (256, 1, 1))
    assert a1[0] is gate and _address(a1[1]) == _address(up) and a1[2] is dev["h"]  # concat: up is F values on
    assert [int(v) for v in a1[3:]] == [37 * 1408, 1408, ld, ld]
    assert (u2, n2, grid2, block2) == (quantize, "quantize_q8_1", (6, 37, 1), (256, 1, 1))
    assert a2[0] is dev["h"] and a2[1] is outs["q"]
    assert [int(v) for v in a2[2:8]] == [1408, 1408, 37 * 1408, 37 * 1408, 1408, 37]


# --- the error model ----------------------------------------------------------------------------------------
def test_the_model_is_the_familys_bound_with_ggmls_arithmetic(families, fake_tree):
    attach(families, locate(fake_tree))
    family = families["swiglu_q8"]
    case = family.rows_case("q8_0", 37, "edge:2", "split")
    host = family.make_inputs(case)
    model = family.variant("ggml").error_model
    wide = {e.output: e.tol for e in expected(swiglu_reference(host["gate"], host["up"], ggml_swiglu()))}
    for exp in family.reference(case, host):
        bound = model.bounds(case, host, exp, None)
        np.testing.assert_array_equal(bound, wide[exp.output])
        assert (bound != exp.tol).any()
        if exp.output == "q:values":  # 2-ulp divisions in the quantization: every block's bound wider (but 0's)
            assert (bound >= exp.tol).all() and (bound[exp.ref != 0] > exp.tol[exp.ref != 0]).all()
    assert model.applies("q2_0") and model.judges_baseline


def test_the_silu_term():
    ulp, u = 2.0 ** -23, 2.0 ** -24
    g = np.array([0.0, 10.0, -10.0, -79.0, -81.0, 90.0])
    weight = 1 / (1 + np.exp(g))
    want = 1.01 * ((2 + 1.173 * np.abs(g)) * ulp * weight + u + 2 * ulp + u)
    want[-2] = 1.0  # below -80 the approximate division may give 0: all of silu lost
    want[-1] = 1.01 * (weight[-1] + u + 2 * ulp + u)  # __expf(-90) may flush to zero: all of its share lost
    np.testing.assert_array_equal(swiglu_h_rel(g), want)
    assert (swiglu_h_rel(np.array([-5.0, -20.0, -60.0])) > H_REL).all()  # the built-ins' 8u would not hold


def _silu_like_ggml(g32, u32, rng):
    """h = (g / (1 + __expf(-g))) * u in float32 with __expf off by up to its worst case (2 + floor(1.173 |g|)
    ulp) and the approximate division off by up to 2 ulp, each in a random direction and amount."""
    with np.errstate(over="ignore"):
        e = np.exp(-g32.astype(np.float64)).astype(np.float32)
    off = rng.choice([-1, 1], e.shape) * (2 + np.floor(1.173 * np.abs(g32))) * np.spacing(e)
    e = np.where(np.isinf(e), e, e + off).astype(np.float32)  # an overflow stays inf: g / inf is -0 or 0
    q = (g32 / (np.float32(1) + e)).astype(np.float32)
    q = (q + rng.integers(-2, 3, q.shape) * np.spacing(q)).astype(np.float32)
    return (q * u32).astype(np.float32)


def _quantize_like_ggml(h32, rng):
    """quantize_q8_1 in float32 with both divisions off by up to 2 ulp: (d16, q, s16) per 32-value block."""
    blocks = h32.reshape(h32.shape[0], -1, 32)
    amax = np.abs(blocks).max(axis=-1)
    d = (amax / np.float32(127)).astype(np.float32)
    d = (d + rng.integers(-2, 3, d.shape) * np.spacing(d)).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = (blocks / d[..., None]).astype(np.float32)
    y = (y + rng.integers(-2, 3, y.shape) * np.spacing(y)).astype(np.float32)
    q = np.where(amax[..., None] == 0, 0, np.trunc(y + np.copysign(np.float32(0.5), y)))  # roundf
    s = blocks.copy()
    for offset in (16, 8, 4, 2, 1):  # warp_reduce_sum's butterfly, every lane the same total
        s = (s + s[..., np.arange(32) ^ offset]).astype(np.float32)
    return d.astype(np.float16), q, s[..., 0].astype(np.float16)


@pytest.mark.parametrize("rows,fmt,data,layout", [(37, "q8_0", "seed:1", "split"), (37, "iq4_nl", "edge:2", "concat"),
                                                  (1, "q2_0", "edge:2", "split"), (4113, "q8_0", "seed:1", "split")])
def test_ggmls_emulated_worst_cases_are_within_the_model_on_the_familys_cases(families, fake_tree, rows, fmt, data,
                                                                             layout):
    attach(families, locate(fake_tree))
    family = families["swiglu_q8"]
    case = family.rows_case(fmt, rows, data, layout)
    host = family.make_inputs(case)
    model = family.variant("ggml").error_model
    refs = {e.output: e for e in family.reference(case, host)}
    rng = np.random.default_rng(7)
    for _ in range(2):
        d16, q, s16 = _quantize_like_ggml(_silu_like_ggml(host["gate"], host["up"], rng), rng)
        values = (d16.astype(np.float64)[..., None] * q).reshape(refs["q:values"].ref.shape)
        assert (np.abs(values - refs["q:values"].ref) <= model.bounds(case, host, refs["q:values"], None)).all()
        assert (np.abs(s16.astype(np.float64) - refs["q:sums"].ref) <= model.bounds(case, host, refs["q:sums"], None)).all()
    # One code one off, away from its value, is outside it: the model still sees a wrong byte.
    h = refs["q:values"].ref[-1, 3]  # the last row's first block: never all zero, not even in edge data
    q[-1, 0, 3] += 1 if d16[-1, 0] * q[-1, 0, 3] >= h else -1
    values = (d16.astype(np.float64)[..., None] * q).reshape(refs["q:values"].ref.shape)
    assert not (np.abs(values - refs["q:values"].ref) <= model.bounds(case, host, refs["q:values"], None)).all()


def test_a_rounding_flipped_by_two_ulp_divisions_is_within_ggmls_bound_not_the_built_ins():
    # amax 127: d = 1 exactly, so x / d is x, and d16 = d: the bounds' fp16 term 127 halfulp16(d) is unused.
    x = np.float32(126.5) - 2 * np.spacing(np.float32(126.5))  # the division may return 126.5 or above: q = 127
    err = abs(127.0 - float(x))
    fp16_term = 127 * fp16_half_ulp(1.0 * (1 + 2.0 ** -22))
    assert err > q8_1_value_error(np.array(127.0)) - fp16_term  # over the built-in's rounding term d (0.5 + 128u)
    assert err <= fast_q8_1_value_error(np.array(127.0)) - fp16_term  # within ggml's d (0.5 + 509u)


# --- the pinned tree ------------------------------------------------------------------------------------------
def test_the_real_tree_takes_the_paths_the_plans_follow(real_tree):
    tree = locate(real_tree)
    assert glu.lacking(tree) is None and glu.block_size(tree) == 256
    text = " ".join((real_tree / glu.UNARY).read_text().split())
    for line in (  # GGML_OP_GLU SWIGLU: the gated kernel with op_silu
            "void ggml_cuda_op_swiglu(ggml_backend_cuda_context & ctx, ggml_tensor * dst) { "
            "ggml_cuda_op_unary_gated<op_silu>(ctx, dst); }",
            # the launch: a CUDA block of CUDA_GLU_BLOCK_SIZE threads an element each
            "const int64_t num_blocks = (k + CUDA_GLU_BLOCK_SIZE - 1) / CUDA_GLU_BLOCK_SIZE;",
            "ggml_cuda_kernel_launch(unary_gated_op_kernel<op, T>, launch_params, x, g, dst, k, n, o0, o1);",
            "const int64_t j0 = (i / n) * o0 + (i % n);", "const int64_t j1 = o0 == o1 ? j0 : (i / n) * o1 + (i % n);",
            # split: two tensors, their row strides; concat: one tensor, gate first unless swapped
            "const int64_t src0_o = src0->nb[1];", "const int64_t src1_o = src1 ? src1->nb[1] : src0->nb[1];",
            "const int64_t nc = src1 ? src0->ne[0] : src0->ne[0] / 2;",
            "src0_p += swapped ? nc : 0; src1_p += swapped ? 0 : nc;",
            "unary_gated_cuda<op>(src0_p, src1_p, (float *)dst_d, ggml_nelements(dst), nc, src0_o / sizeof(float), "
            "src1_o / sizeof(float), stream);"):
        assert line in text, line
    quantize = " ".join((real_tree / QUANTIZE).read_text().split())
    for line in ("const float d = amax / 127.0f;", "const int8_t q = amax == 0.0f ? 0 : roundf(xi / d);",
                 "sum = warp_reduce_sum<QK8_1>(sum);", "y[ib].ds = make_half2(d, sum);"):
        assert line in quantize, line
    assert re.search(r"#define CUDA_QUANTIZE_BLOCK_SIZE\s+256\b", (real_tree / "src/ggml-cuda/quantize.cuh").read_text())


@pytest.mark.nvrtc
def test_the_real_trees_gated_kernel_compiles_and_matches_its_launch(nvrtc_compile):
    """unary.cu built by NVRTC (a few seconds): the instance is found by its name expression (a static
    function as its template argument) and its parameters checked against glu.SIGNATURE."""
    compiled = nvrtc_compile("swiglu_q8", glu.UNARY, [glu.NAME])
    (lowered,) = compiled.lowered.values()
    assert lowered.startswith("_Z21unary_gated_op_kernelIXadL_ZN") and "op_siluEfEEfEvPKT0_S3_PS1_llll" in lowered
