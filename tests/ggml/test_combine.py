"""combine.py and moe_combine's variant ggml without a GPU: the six launches of ggml's chain (instance, grid,
block, every argument) for contiguous and padded rows, what a tree must have, the cases the variant runs and
what it omits; the error model (moe_combine's bounds with ggml's arithmetic) against a float32 emulation of
the chain with its approximate division and rsqrtf at their worst; on the pinned real tree, the code paths
the plans follow and an NVRTC build of the five sources."""
from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest

from strata_bench.families.moe_combine import THREADS, expected, moe_reference
from strata_bench.ggml import combine
from strata_bench.ggml.fusion_error import CombineErrorModel, ggml_norm
from strata_bench.ggml.tree import locate
from strata_bench.ggml.variants import attach
from tests.ggml_trees import lacking_after

ONE = (1, 0, 1)  # init_fastdiv_values(1)
ZERO = (0, 0, 0)
N = combine.Numbers(reduction=256, bcast=128, hc_post=256, hc_pre=256, norm_cut=1024, norm_small=256,
                    norm_large=1024, cpy=64, max_experts=15)
Y, W, C0, S, C, RIN, BETA, ROUT, ALPHA, X, G, YN, XN = (object() for _ in range(13))


def _values(launch):
    return {p.label: p.value for p in launch.params}


def _shape(t, h, ld, k=8):
    return {"T": t, "H": h, "K": k, "ld": ld}


def test_the_reduction_launch():
    launch = combine.reduction_plan(N, _shape(333, 2048, 2048), Y, W, C0)
    assert (launch.kernel, launch.grid, launch.block) == ("moe_weighted_reduction_f32", (333, 8, 1), (256, 1, 1))
    assert _values(launch) == {"experts": Y, "expert_scale": 0, "weights": W, "dst": C0, "n_embd": 2048,
                               "n_expert_used": 8}


def test_the_add_collapses_contiguous_rows_and_keeps_padded_ones():
    from strata_bench.toml_abi.args import fastdiv_values as fd

    flat = combine.add_plan(N, _shape(333, 2048, 2048), C0, S, C)
    assert (flat.kernel, flat.grid, flat.block) == (  # 333 x 2048 / 2 / 128
        "k_bin_bcast<&op_add, float, float, float, float const*>", (2664, 1, 1), (128, 1, 1))
    whole = 333 * 2048
    assert _values(flat) == {
        "src0": C0, "src1": S, "dst": C, "ne0": whole, "ne1": 1, "ne2": 1, "ne3": ONE, "ne10": fd(whole),
        "ne11": ONE, "ne12": ONE, "ne13": ONE, "s1": whole, "s2": whole, "s3": whole, "s00": 1, "s01": whole,
        "s02": whole, "s03": whole, "s10": 1, "s11": whole, "s12": whole, "s13": whole,
        "src1s": S}  # ggml_add's pack of one pointer: S again
    rows = combine.add_plan(N, _shape(517, 2048, 2112), C0, S, C)
    assert (rows.grid, rows.block) == ((8, 517, 1), (128, 1, 1))  # (ceil(1024 / 128), T)
    values = _values(rows)
    assert (values["ne0"], values["ne1"], values["ne10"], values["ne11"]) == (2048, 517, fd(2048), fd(517))
    assert [values[k] for k in ("s1", "s2", "s3", "s00", "s01", "s02", "s03", "s10", "s11", "s12", "s13")] == [
        2048, 517 * 2048, 517 * 2048, 1, 2048, 517 * 2048, 517 * 2048, 1, 2112, 2112 * 517, 2112 * 517]
    small = combine.add_plan(N, _shape(3, 64, 80), C0, S, C)  # 32 threads a row: 4 rows a CUDA block
    assert (small.grid, small.block) == ((1, 1, 1), (32, 3, 1))
    with pytest.raises(Exception) as err:
        combine.add_plan(N, _shape(70000, 512, 520), C0, S, C)
    assert "k_bin_bcast_unravel" in str(err.value)


def test_the_residual_post_and_pre_launches():
    post = combine.post_plan(N, _shape(517, 2048, 2112), C, RIN, BETA, ROUT)
    assert (post.kernel, post.grid, post.block) == ("dsv4_hc_post_f32<false>", (16544, 1, 1), (256, 1, 1))
    rows = (1, 517 * 2112, 2112)
    assert list(_values(post).values()) == [C, RIN, BETA, 0, ROUT, 2048, 4, 517, 1, 2048, *rows, 517, 1, 0, 0, 0,
                                            *rows]
    pre = combine.pre_plan(N, _shape(517, 2048, 2112), ROUT, ALPHA, X)
    assert (pre.kernel, pre.grid, pre.block) == ("dsv4_hc_pre_f32<false>", (4136, 1, 1), (256, 1, 1))
    assert list(_values(pre).values()) == [ROUT, ALPHA, X, 2048, 4, 517, 1, 517 * 2112, 2112, 517, 1, 4 * 517, 1,
                                           2048, 1.0]


@pytest.mark.parametrize("hidden,block", [(2048, 1024), (4096, 1024), (768, 256), (1024, 1024)])
def test_the_fused_rms_norm_launch(hidden, block):
    from strata_bench.toml_abi.args import fastdiv_values as fd

    launch = combine.norm_plan(N, _shape(3, hidden, hidden), X, G, YN, 1e-6)
    assert (launch.kernel, launch.grid, launch.block, launch.shared) == (
        f"rms_norm_f32<{block}, true, false, false>", (3, 1, 1), (block, 1, 1), 128)
    assert list(_values(launch).values()) == [X, YN, hidden, hidden, 3 * hidden, 3 * hidden, 1e-6, G, hidden, hidden,
                                              hidden, fd(hidden), ONE, ONE, ONE, 0, 0, 0, 0, ZERO, ZERO, ZERO, ZERO,
                                              1.0]


def test_the_cast_launch_contiguous_and_strided():
    flat = combine.cast_plan(N, _shape(333, 2048, 2048), YN, XN)
    assert (flat.kernel, flat.grid, flat.block) == ("cpy_scalar_contiguous<float, __half>", (10656, 1, 1),
                                                    (64, 1, 1))
    assert list(_values(flat).values()) == [YN, XN, 333 * 2048]
    rows = combine.cast_plan(N, _shape(517, 2048, 2112), YN, XN)
    assert (rows.kernel, rows.grid) == ("cpy_scalar<&cpy_1_scalar<float, __half>>", (16544, 1, 1))
    assert list(_values(rows).values()) == [YN, XN, 517 * 2048, 2048, 517, 1, 4, 4 * 2048, 4 * 2048 * 517,
                                            4 * 2048 * 517, 2048, 517, 1, 2, 2 * 2112, 2 * 2112 * 517, 2 * 2112 * 517]


def test_every_signature_has_the_kernels_parameter_count():
    counts = {"moe_weighted_reduction_f32": 6, "k_bin_bcast": 23, "dsv4_hc_post_f32": 21, "dsv4_hc_pre_f32": 15,
              "rms_norm_f32": 24, "cpy_scalar": 17, "cpy_scalar_contiguous": 3}
    assert {k: len(v) for k, v in combine.SIGNATURES.items()} == counts
    assert combine.instances(N)[combine.NORM] == ("rms_norm_f32<256, true, false, false>",
                                                  "rms_norm_f32<1024, true, false, false>")


@pytest.mark.parametrize("where,old,new,line", [
    (combine.HC, "int64_t sd1, int64_t sd2", "int64_t sd1, int sd2",
     "src/ggml-cuda/dsv4-hc.cu: dsv4_hc_post_f32's parameters changed (an unsupported ggml version): (const float * x, "
     "const float * residual, const float * post, const float * comb, float * dst, int64_t n_embd, int64_t hc, "
     "int64_t n_tokens, int64_t sx0, int64_t sx1, int64_t sr0, int64_t sr1, int64_t sr2, int64_t sp0, int64_t sp1, "
     "int64_t sc0, int64_t sc1, int64_t sc2, int64_t sd0, int64_t sd1, int sd2)"),
    (combine.NORM, "rsqrtf(mean + eps)", "rsqrtf(mean + eps*eps)",
     "src/ggml-cuda/norm.cu has no `const float scale = rsqrtf(mean + eps);`, which moe_combine's error model bounds "
     "(an unsupported ggml version?)"),
    ("src/ggml-cuda/cpy.cuh", "CUDA_CPY_BLOCK_SIZE 64", "CUDA_CPY_BLOCK_SIZE 4096",
     "the block sizes of moe_combine's launches were not all found (reduction, bcast, hc_post, hc_pre, norm_cut, "
     "norm_small, norm_large, cpy, max_experts: src/ggml-cuda/binbcast.cu, src/ggml-cuda/cpy.cuh, "
     "src/ggml-cuda/dsv4-hc.cu, src/ggml-cuda/ggml-cuda.cu, src/ggml-cuda/moe-weighted-reduction.cu, "
     "src/ggml-cuda/norm.cu; an unsupported ggml version?)"),
])
def test_what_a_tree_lacks_is_named(fake_tree, where, old, new, line):
    assert lacking_after(fake_tree, combine.lacking, where, old, new) == line


def test_a_tree_without_the_reduction_names_its_file(fake_tree):
    (fake_tree / combine.REDUCTION).unlink()
    assert combine.lacking(locate(fake_tree)) == ("src/ggml-cuda/moe-weighted-reduction.cu is missing: moe_combine's "
                                                  "chain launches its kernels (an older ggml?)")


def test_a_tree_held_to_anothers_bits_needs_no_bounded_arithmetic(fake_tree):
    path = fake_tree / combine.NORM
    path.write_text(path.read_text().replace("rsqrtf(mean + eps)", "rsqrtf(mean + eps*eps)"))
    assert combine.lacking(locate(fake_tree)) is not None and combine.lacking(locate(fake_tree), bounded=False) is None


# --- the variant ------------------------------------------------------------------------------------------------
@pytest.fixture
def numpy_cupy(monkeypatch):
    """prepare's cupy: numpy (the arrays it makes are the same)."""
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(empty=np.empty, float32=np.float32,
                                                             ascontiguousarray=np.ascontiguousarray))


def test_the_variant_runs_fused_top_ks_and_omits_what_ggml_never_forms(families, fake_tree):
    tree = locate(fake_tree)
    attach(families, tree)
    family = families["moe_combine"]
    variant = family.variant("ggml")
    assert variant.omits == ("rs", "xn16_lo", "xn16+lo") and isinstance(variant.error_model, CombineErrorModel)
    assert [family.runs(variant, family.tokens_case(5, "seed:1", False, topk=k)) for k in (1, 2, 8, 15, 16)] == [
        False, True, True, True, False]  # ggml's fused reduction takes 2 to 15 experts
    assert all("ggml" in c.variants for c in family.default_cases())
    units = {s: f"{tree.path(s)}@ggml" for s in combine.SOURCES}
    assert [s for s in family.sources if s.endswith("@ggml")] == list(units.values())
    assert {s: tuple(variant.kernels(family, u)) for s, u in units.items()} == combine.instances(N)
    assert variant.kernels(family, family.sources[0]) == []


@pytest.mark.parametrize("ld", [2048, 2112])
def test_prepare_makes_the_intermediates_and_packs_padded_experts(families, fake_tree, numpy_cupy, ld):
    attach(families, locate(fake_tree))
    family = families["moe_combine"]
    case = family.tokens_case(5, "seed:1", False, ld=ld)
    host = family.make_inputs(case)
    made = family.variant("ggml").prepare(family, case, dict(host))
    assert {k: v.shape for k, v in made.items() if k != "ggml_Y"} == {f"ggml_{k}": (5, 2048) for k in
                                                                      ("c0", "c", "x", "y")}
    if ld == 2048:
        assert "ggml_Y" not in made  # the family's rows are ggml's
    else:
        np.testing.assert_array_equal(made["ggml_Y"], host["Y"][..., :2048])
        assert made["ggml_Y"].flags.c_contiguous


def test_the_launch_runs_the_chain_in_ggmls_order(families, fake_tree):
    tree = locate(fake_tree)
    attach(families, tree)
    family = families["moe_combine"]
    case = family.tokens_case(5, "seed:1", True, ld=2112)
    calls = []

    def in_source(unit, name):
        return lambda grid, block, args, stream=None, **kw: calls.append((unit.rsplit("/", 1)[1], name))

    dev = {k: np.zeros(4, np.float32) for k in ("w", "Y", "S", "R_in", "beta", "alpha", "g", "ggml_c0", "ggml_c",
                                                "ggml_x", "ggml_y", "ggml_Y")}
    outs = {k: np.zeros(4, np.float32) for k in ("R_out", "rs", "xn16", "xn16_lo")}
    family.variant("ggml").launch(family, case, SimpleNamespace(in_source=in_source), dev, outs)
    assert calls == [("moe-weighted-reduction.cu@ggml", "moe_weighted_reduction_f32"),
                     ("binbcast.cu@ggml", "k_bin_bcast<&op_add, float, float, float, float const*>"),
                     ("dsv4-hc.cu@ggml", "dsv4_hc_post_f32<false>"), ("dsv4-hc.cu@ggml", "dsv4_hc_pre_f32<false>"),
                     ("norm.cu@ggml", "rms_norm_f32<1024, true, false, false>"),
                     ("cpy.cu@ggml", "cpy_scalar<&cpy_1_scalar<float, __half>>")]


# --- the error model ----------------------------------------------------------------------------------------
def test_the_model_is_the_familys_bound_with_ggmls_arithmetic(families, fake_tree):
    attach(families, locate(fake_tree))
    family = families["moe_combine"]
    case = family.tokens_case(333, "edge:5", True)
    host = family.make_inputs(case)
    model = family.variant("ggml").error_model
    wide = {e.output: e.tol for e in expected(moe_reference(host, 2048, 1e-6, ggml_norm(N)), 2048, True)}
    for exp in family.reference(case, host):
        if exp.output in ("R_out", "xn16"):
            np.testing.assert_array_equal(model.bounds(case, host, exp, None), wide[exp.output])
    own = {e.output: e.tol for e in family.reference(case, host)}
    assert (wide["R_out"] > own["R_out"]).all()  # an unfused product and flushes: wider everywhere
    assert ggml_norm(N).sum_depth(2048) == 2 * 2 + 10 and ggml_norm(N).sum_depth(768) == 2 * 3 + 10
    assert model.applies("f32")


def _chain_like_ggml(host, hidden, eps, rsqrt_ulps=2, div_ulps=2):
    """ggml's chain in float32: the reduction and the residual update with their products rounded apart
    from their adds, the sum of squares a thread of 1024 at a time then a tree, the division and rsqrtf off
    by their ulps (up, the worse for y), y = (rs x) g, cast to fp16."""
    f = np.float32
    y_in, w = host["Y"][..., :hidden], host["w"]
    c = (y_in[:, 0] * w[:, :1]).astype(f)
    for k in range(1, w.shape[1]):
        c = (c + (y_in[:, k] * w[:, k:k + 1]).astype(f)).astype(f)
    c = (c + host["S"][..., :hidden]).astype(f)
    r = ((c[None] * host["beta"][:, :, None]).astype(f) + host["R_in"][..., :hidden]).astype(f)
    x = np.zeros_like(c)
    for row in range(r.shape[0]):
        x = (x + (r[row] * host["alpha"][row][:, None]).astype(f)).astype(f)
    lanes = (x * x).astype(f).reshape(x.shape[0], -1, min(hidden, 1024)).sum(axis=1, dtype=f)
    while lanes.shape[1] > 1:  # a pairwise tree for the warps' butterflies
        lanes = (lanes[:, ::2] + lanes[:, 1::2]).astype(f)
    mean = (lanes[:, 0] / f(hidden)).astype(f)
    mean = (mean + div_ulps * np.spacing(mean)).astype(f)
    v = (mean + f(eps)).astype(f)
    rs = (f(1) / np.sqrt(v)).astype(f)
    rs = (rs + rsqrt_ulps * np.spacing(rs)).astype(f)
    y = ((rs[:, None] * x).astype(f) * host["g"]).astype(f)
    return r, y.astype(np.float16)


@pytest.mark.parametrize("tokens,data,hidden,ld", [(333, "seed:2", 2048, None), (333, "edge:5", 2048, None),
                                                   (517, "seed:4", 2048, 2112), (3, "seed:6", 4096, None)])
def test_ggmls_emulated_chain_is_within_the_model_on_the_familys_cases(families, fake_tree, tokens, data, hidden,
                                                                      ld):
    attach(families, locate(fake_tree))
    family = families["moe_combine"]
    case = family.tokens_case(tokens, data, False, hidden=hidden, ld=ld)
    host = family.make_inputs(case)
    model = family.variant("ggml").error_model
    refs = {e.output: e for e in family.reference(case, host)}
    r, xn16 = _chain_like_ggml(host, hidden, 1e-6)
    for name, got in (("R_out", r), ("xn16", xn16)):
        exp = refs[name]
        err = np.abs(got.astype(np.float64) - exp.ref[..., :hidden])
        assert (err <= model.bounds(case, host, exp, None)[..., :hidden]).all(), name
    # rsqrtf 64 ulp off (a changed norm) moves some fp16 roundings past the bound
    _, off = _chain_like_ggml(host, hidden, 1e-6, rsqrt_ulps=64)
    err = np.abs(off.astype(np.float64) - refs["xn16"].ref[..., :hidden])
    assert not (err <= model.bounds(case, host, refs["xn16"], None)[..., :hidden]).all()


def test_a_dropped_expert_is_outside_the_model(families, fake_tree):
    attach(families, locate(fake_tree))
    family = families["moe_combine"]
    case = family.tokens_case(333, "seed:2", False)
    host = dict(family.make_inputs(case))
    model = family.variant("ggml").error_model
    exp = next(e for e in family.reference(case, host) if e.output == "R_out")
    dropped = dict(host, w=host["w"].copy())
    dropped["w"][7, -1] = 0.0  # one token's last expert left out of the sum
    r, _ = _chain_like_ggml(dropped, 2048, 1e-6)
    bad = np.abs(r - exp.ref) > model.bounds(case, host, exp, None)
    assert bad[:, 7].any() and not np.delete(bad, 7, axis=1).any()


# --- the pinned tree ------------------------------------------------------------------------------------------
def test_the_real_tree_takes_the_paths_the_plans_follow(real_tree):
    tree = locate(real_tree)
    assert combine.lacking(tree) is None and combine.numbers(tree) == N
    assert THREADS == 256  # the family's own block: its sum's depth is the built-in's, not ggml's
    text = {s: " ".join((real_tree / s).read_text().split()) for s in (*combine.SOURCES, "src/ggml-cuda/ggml-cuda.cu")}
    for source, line in (
            # the fused reduction: its match (MUL + VIEWs + ADDs, 2 to 15 experts) and its launch
            ("src/ggml-cuda/ggml-cuda.cu", "if (n_expert_used < 2 || n_expert_used > MOE_WEIGHTED_REDUCTION_MAX_EXPERTS "
                                           "|| n_tokens <= 0) {"),
            ("src/ggml-cuda/ggml-cuda.cu", "ggml_cuda_op_moe_weighted_reduction( *cuda_ctx, match.experts, "
                                           "match.expert_scale, match.weights, match.dst);"),
            (combine.REDUCTION, "const dim3 blocks(n_tokens, (n_embd + threads - 1) / threads, 1);"),
            (combine.REDUCTION, "const float first_scale = expert_scale != nullptr ? expert_scale[first_row] : 1.0f;"),
            # the add: collapsed dims where both operands are contiguous, 128 threads
            (combine.BINBCAST, "if (ggml_is_contiguous(src0) && ggml_is_contiguous(src1) && !ggml_is_permuted(src0) "
                               "&& !ggml_is_permuted(src1)) {"),
            (combine.BINBCAST, "block_dims.x = std::min<unsigned int>(hne0, block_size);"),
            (combine.BINBCAST, "block_dims.y = std::min<unsigned int>(ne1, block_size / block_dims.x);"),
            (combine.BINBCAST, "if (block_nums.z > 65535 || block_nums.y > 65535) {"),
            # the residual rows without comb, the norm's input not gated, one thread an element
            (combine.HC, "auto kernel = comb ? dsv4_hc_post_f32<true> : dsv4_hc_post_f32<false>;"),
            (combine.HC, "auto kernel = gated ? dsv4_hc_pre_f32<true> : dsv4_hc_pre_f32<false>;"),
            (combine.HC, "const int64_t nr = n_embd * hc * n_tokens;"), (combine.HC, "const int64_t nr = n_embd * n_tokens;"),
            # RMS_NORM + MUL fused, mul's strides and counts; a CUDA block a row
            ("src/ggml-cuda/ggml-cuda.cu", "ggml_cuda_op_rms_norm_fused(*cuda_ctx, node, cgraph->nodes[i + 1]);"),
            (combine.NORM, "const dim3 blocks_num(nrows, nchannels, nsamples);"),
            (combine.NORM, "const ggml_cuda_kernel_launch_params launch_params = ggml_cuda_kernel_launch_params"
                           "{blocks_num, block_dims, block_dims.x > WARP_SIZE ? 32 * sizeof(float): 0, stream};"),
            (combine.NORM, "const int mul_ncols = mul_src->ne[0];"),
            # the cast: contiguous, else the generic scalar copy
            (combine.CPY, "ggml_cpy_scalar_contiguous_cuda<float, half> (src0_ddc, src1_ddc, ne, main_stream);"),
            (combine.CPY, "ggml_cpy_scalar_cuda<float, half> (src0_ddc, src1_ddc, ne, ne00, ne01, ne02, nb00, nb01, "
                          "nb02, nb03, ne10, ne11, ne12, nb10, nb11, nb12, nb13, main_stream);"),
            (combine.CPY, "const int64_t num_blocks = (ne + CUDA_CPY_BLOCK_SIZE - 1) / CUDA_CPY_BLOCK_SIZE;")):
        assert line in text[source], line


@pytest.mark.nvrtc
def test_the_real_trees_chain_compiles_and_matches_its_launches(nvrtc_compile):
    """The five sources built by NVRTC (about 10 s): every instance found by its name expression and its
    parameters checked against combine.SIGNATURES."""
    for source, names in combine.instances(N).items():
        compiled = nvrtc_compile("moe_combine", source, names)
        assert sorted(compiled.lowered) == sorted(names)
