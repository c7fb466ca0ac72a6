"""moe.py and grouped's variant ggml without a GPU: ggml's MoE mat-vec launches (instance, grid, block, every
argument of the one-token MUL_MAT_ID), the packed experts and ids it runs on, what a tree must have; the
error model (grouped's bounds widened by ggml's arithmetic) and its fast-math SwiGLU term against emulated
worst cases; on the pinned real tree, the code paths the plans follow."""
from __future__ import annotations

import re
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from strata_bench.families.grouped import NO_ALLOWANCE, SILU_REL, grouped_reference, silu, swiglu_bound
from strata_bench.ggml import moe
from strata_bench.ggml.error import MoeErrorModel, down_rel, fast_silu_rel, moe_allowance
from strata_bench.ggml.tree import MMVQ, locate
from strata_bench.ggml.variants import attach
from tests.ggml_trees import lacking_after, with_iq4_nl

ONE = (1, 0, 1)  # init_fastdiv_values(1)
BY_35 = (3558687189, 6, 35)  # init_fastdiv_values(35): 35 slots
W, XQ, IDS, Y, G = (object() for _ in range(5))
GROUPS = (5, 0, 1, 8, 3, 6, 2, 7, 3)  # grouped's default: 9 experts, 35 entries


@pytest.fixture
def tree(fake_tree):
    return locate(with_iq4_nl(fake_tree))


def _shape(rows, k, block_values, block_bytes, experts=9, entries=35):
    return {"rows": rows, "k": k, "experts": experts, "entries": entries, "block_values": block_values,
            "block_bytes": block_bytes}


def _values(launch):
    return {p.label: p.value for p in launch.params}


def test_the_fused_gate_up_launch(tree):
    launch = moe.plan(tree, "iq2_xxs", _shape(512, 1024, 256, 66), W, XQ, IDS, Y, gate=G)
    # 4 blocks a row < 4 warps x 4 blocks a trip: small_k, 4 rows a CUDA block
    assert launch.kernel == "mul_mat_vec_q<(ggml_type)16, 1, true, true, false>"
    assert (launch.grid, launch.block) == ((128, 35, 1), (32, 4, 1))
    assert _values(launch) == {
        "vx": W, "vy": XQ, "ids": IDS, "fusion": {"gate": G, "glu_op": 2}, "dst": Y, "ncols_x": 1024,
        "nchannels_y": BY_35, "stride_row_x": 4, "stride_col_y": 35 * 32, "stride_col_dst": 35 * 512,
        "channel_ratio": (0, 0, 0), "stride_channel_x": 512 * 4, "stride_channel_y": 32, "stride_channel_dst": 512,
        "sample_ratio": ONE, "stride_sample_x": 9 * 512 * 4, "stride_sample_y": 35 * 32,
        "stride_sample_dst": 35 * 512, "ids_stride": 35}


def test_the_down_launch_has_no_fusion(tree):
    launch = moe.plan(tree, "iq4_nl", _shape(1024, 512, 32, 18), W, XQ, IDS, Y)
    assert launch.kernel == "mul_mat_vec_q<(ggml_type)20, 1, false, true, false>"  # 16 blocks < 4 x 16
    assert (launch.grid, launch.block) == ((256, 35, 1), (32, 4, 1))
    values = _values(launch)
    assert (values["fusion"], values["stride_row_x"], values["stride_channel_x"], values["stride_col_dst"]) == (
        {}, 16, 1024 * 16, 35 * 1024)


def test_iq3_s_never_takes_small_k(tree):
    launch = moe.plan(tree, "iq3_s", _shape(512, 1024, 256, 110), W, XQ, IDS, Y, gate=G)
    assert launch.kernel == "mul_mat_vec_q<(ggml_type)21, 1, true, false, false>"
    assert launch.grid == (512, 35, 1)
    assert moe.readable_rows(tree, "iq3_s", 510, 1024, 256, 9) == 9 * 510
    assert moe.readable_rows(tree, "iq2_xxs", 510, 1024, 256, 9) == 8 * 510 + 512  # the last block's 4 rows


def test_instances(tree):
    assert moe.instances(tree, ("iq2_xxs", "iq3_s"), ("iq4_nl",)) == [
        "mul_mat_vec_q<(ggml_type)16, 1, true, false, false>", "mul_mat_vec_q<(ggml_type)16, 1, true, true, false>",
        "mul_mat_vec_q<(ggml_type)21, 1, true, false, false>",
        "mul_mat_vec_q<(ggml_type)20, 1, false, false, false>", "mul_mat_vec_q<(ggml_type)20, 1, false, true, false>"]


@pytest.mark.parametrize("enum,value", [
    ("GGML_GLU_OP_REGLU,\n GGML_GLU_OP_GEGLU,\n GGML_GLU_OP_SWIGLU,", 2),
    ("GGML_GLU_OP_REGLU = 4, // four\n GGML_GLU_OP_SWIGLU,", 5),
    ("GGML_GLU_OP_SWIGLU = 0x7,", 7),
    ("GGML_GLU_OP_REGLU,", None),
])
def test_the_swiglu_value_is_read_from_the_enum(fake_tree, enum, value):
    header = fake_tree / "include/ggml.h"
    header.write_text(re.sub(r"enum ggml_glu_op \{[^}]*\}", f"enum ggml_glu_op {{\n {enum}\n}}", header.read_text()))
    assert moe.swiglu_op(locate(fake_tree)) == value


@pytest.mark.parametrize("where,old,new,line", [
    ("src/ggml-cuda/common.cuh", "float glu_limit", "double glu_limit",
     "src/ggml-cuda/common.cuh: ggml_cuda_mm_fusion_args_device is not the struct mul_mat_vec_q's fused launch "
     "passes"),
    ("include/ggml.h", "GGML_GLU_OP_SWIGLU,", "GGML_GLU_OP_SILU,",
     "include/ggml.h: enum ggml_glu_op has no GGML_GLU_OP_SWIGLU, the GLU the fused gate/up launch asks for"),
    ("src/ggml-cuda/unary.cuh", "expf(-x)", "__expf(-x)",
     "src/ggml-cuda/unary.cuh: ggml_cuda_op_silu_single is not `return x / (1.0f + expf(-x));`, which grouped's "
     "error model bounds"),
])
def test_what_a_tree_lacks_is_named(fake_tree, where, old, new, line):
    assert lacking_after(fake_tree, moe.lacking, where, old, new) == line


# --- the variant ------------------------------------------------------------------------------------------------
@pytest.fixture
def numpy_cupy(monkeypatch):
    """prepare's cupy: numpy (the copies it makes are the same)."""
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(zeros=np.zeros, uint8=np.uint8, asarray=np.asarray))


def test_the_variant_runs_the_formats_ggml_has(families, tree):
    assert "grouped" in attach(families, tree)
    family = families["grouped"]
    variant = family.variant("ggml")
    assert isinstance(variant.error_model, MoeErrorModel) and variant.error_model.formats == ("iq2_xxs", "iq3_s")
    runs = {(g, d): family.runs(variant, family.expert_case(g, d, 512, 1024, GROUPS))
            for g in ("iq2_xxs", "iq2_xs", "iq3_s", "q2_0") for d in ("iq4_nl", "iq4_xs", "q2_0")}
    assert {pair for pair, on in runs.items() if on} == {("iq2_xxs", "iq4_nl"), ("iq3_s", "iq4_nl")}
    assert variant.kernels(family, f"{tree.path(MMVQ)}@ggml") == moe.instances(tree, ("iq2_xxs", "iq3_s"),
                                                                               ("iq4_nl",))
    assert variant.kernels(family, family.sources[1]) == []


def test_prepare_packs_the_experts_and_writes_the_ids(families, tree, numpy_cupy):
    from strata_bench.data.weights import padded

    attach(families, tree)
    family = families["grouped"]
    case = family.expert_case("iq2_xxs", "iq4_nl", 512, 1024, GROUPS)
    host = family.make_inputs(case)
    dev = {k: host[k]["padded"] for k in ("gate", "up", "down")}
    made = family.variant("ggml").prepare(family, case, dev)
    np.testing.assert_array_equal(made["ggml_ids"], np.repeat(np.arange(9, dtype=np.int32), GROUPS))
    assert made["ggml_ids"].dtype == np.int32
    # iq2_xxs rows of 264 bytes at 272: packed; iq4_nl's 288 bytes are already whole 16-byte rows
    assert sorted(made) == ["ggml_gate", "ggml_ids", "ggml_up"]
    np.testing.assert_array_equal(made["ggml_gate"], host["gate"]["raw"].reshape(9 * 512, 264))
    assert padded("iq4_nl", host["down"]["raw"].reshape(-1, 288)).size == 9 * 1024 * 288 + 16


def test_launch_quantizes_then_runs_the_fused_and_the_down_launch(families, tree, numpy_cupy):
    attach(families, tree)
    family = families["grouped"]
    case = family.expert_case("iq2_xxs", "iq4_nl", 512, 1024, GROUPS)
    calls = []

    def in_source(unit, name):
        assert unit == f"{tree.path(MMVQ)}@ggml"
        def record(grid, block, args, stream=None):
            fusion = (int(args[3]["gate"]), int(args[3]["glu_op"]))
            calls.append((name, grid, *_named(args[0], args[2], args[4]), fusion))
        return record

    def get(name):
        assert name == "quantize_q8_1"
        return lambda grid, block, args, stream=None: calls.append(("q8_1", _name(args[0]), int(args[1]), _name(args[2])))

    # Stand-ins of device arrays: a launch passes them as they are, a struct takes their address.
    names = ("gate", "up", "down", "x", "xq", "hq", "ggml_ids", "ggml_gate", "ggml_up")
    dev = {k: SimpleNamespace(data=SimpleNamespace(ptr=4096 * (i + 1))) for i, k in enumerate(names)}
    outs = {"H": SimpleNamespace(data=SimpleNamespace(ptr=1 << 20)), "Y": SimpleNamespace(data=SimpleNamespace(ptr=2 << 20))}
    arrays = {**dev, **outs}

    def _name(array):
        return next(k for k, v in arrays.items() if v is array)

    def _named(*args):
        return tuple(_name(a) for a in args)

    family.variant("ggml").launch(family, case, SimpleNamespace(in_source=in_source, get=get), dev, outs)
    assert calls == [
        ("q8_1", "x", 35 * 32, "xq"),
        ("mul_mat_vec_q<(ggml_type)16, 1, true, true, false>", (128, 35, 1), "ggml_up", "ggml_ids", "H",
         (dev["ggml_gate"].data.ptr, 2)),
        ("q8_1", "H", 35 * 16, "hq"),
        ("mul_mat_vec_q<(ggml_type)20, 1, false, true, false>", (256, 35, 1), "down", "ggml_ids", "Y", (0, 0))]


# --- the error model ----------------------------------------------------------------------------------------
def test_the_model_is_groupeds_bound_with_ggmls_allowance(families, tree):
    attach(families, tree)
    family = families["grouped"]
    case = family.expert_case("iq2_xxs", "iq4_nl", 512, 1024, GROUPS)
    host = family.make_inputs(case)
    model = family.variant("ggml").error_model
    own = grouped_reference(host, 512, 1024)
    wide = grouped_reference(host, 512, 1024, moe_allowance())
    for exp in family.reference(case, host):
        chain = "raw" if exp.label == "f64(raw acts)" else "q"
        bound = model.bounds(case, host, exp, None)
        np.testing.assert_array_equal(bound, wide[f"t{exp.output}_{chain}"])
        np.testing.assert_array_equal(exp.tol, own[f"t{exp.output}_{chain}"])
        assert (bound > exp.tol).all()  # every element's bound widened, none narrowed
    assert model.applies("iq2_xxs") and not model.applies("iq4_xs")
    assert grouped_reference(host, 512, 1024, NO_ALLOWANCE)["tH_q"].tobytes() == own["tH_q"].tobytes()


def test_the_down_and_silu_terms():
    assert down_rel(512) == (17 + 16) * 2.0 ** -24 * 1.01
    g, bg = np.array([0.0, 10.0, -10.0, -79.0, -81.0]), np.array([0.0, 0.5, 0.5, 0.5, 0.5])
    ulp, u = 2.0 ** -23, 2.0 ** -24
    mag = np.abs(g) + bg
    expected = 1.01 * ((2 + 1.173 * mag) * ulp + u + 2 * ulp + u)
    expected[-2:] = [expected[-2], 1.0]  # -79 - 0.5 is above -80; -81.5 is below: silu all lost
    np.testing.assert_array_equal(fast_silu_rel(g, bg), expected)


def _fast_silu_worst(g32: np.ndarray, u32: np.ndarray, signs: tuple[int, int]) -> np.ndarray:
    """ggml's silu(g) * u in float32 with __expf off by its documented worst case (2 + floor(1.173 |g|) ulp) and
    the approximate division off by 2 ulp, each in the direction `signs` gives."""
    e = np.exp(-g32.astype(np.float64)).astype(np.float32)
    e = e + signs[0] * (2 + np.floor(1.173 * np.abs(g32))) * np.spacing(e)
    q = (g32 / (np.float32(1) + e)).astype(np.float32)
    q = q + signs[1] * 2 * np.spacing(q)
    return (q * u32).astype(np.float32).astype(np.float64)


def test_the_fast_math_silu_bound_covers_its_worst_cases_and_the_built_ins_would_not():
    g32 = np.linspace(-60, 60, 2401, dtype=np.float32)
    u32 = np.float32(1.7) * np.ones_like(g32)
    exact = silu(g32.astype(np.float64)) * u32.astype(np.float64)
    zero = np.zeros(g32.shape)
    fast = swiglu_bound(g32.astype(np.float64), u32.astype(np.float64), zero, zero, fast_silu_rel(g32, zero))
    ieee = swiglu_bound(g32.astype(np.float64), u32.astype(np.float64), zero, zero, SILU_REL)
    worst = np.max([np.abs(_fast_silu_worst(g32, u32, s) - exact) for s in ((1, 1), (1, -1), (-1, 1), (-1, -1))],
                   axis=0)
    assert (worst <= fast).all()
    assert (worst > ieee).sum() > 1000  # the built-ins' 8u would not hold ggml's __expf


# --- the pinned tree ------------------------------------------------------------------------------------------
def test_the_real_tree_takes_the_paths_the_plans_follow(real_tree):
    tree = locate(real_tree)
    assert moe.lacking(tree) is None and moe.swiglu_op(tree) == 2
    text = " ".join((real_tree / MMVQ).read_text().split())
    for line in (  # one token: the expert per slot, the slot's own activation row
            "channel_x = ncols_dst == 1 && ids ? ids[channel_dst] : fastdiv(channel_dst, channel_ratio);",
            "channel_y = ncols_dst == 1 && ids ? fastmodulo(channel_dst, nchannels_y) : channel_dst;",
            # MUL_MAT_ID's strides and counts
            "const int64_t ncols_dst = ids ? ne2 : ne1;", "const int64_t nchannels_y = ids ? ne11 : ne12;",
            "const int64_t nchannels_dst = ids ? ne1 : ne2;", "const int64_t stride_col_dst = ids ? s2 : s1;",
            "const int64_t stride_col_y = ids ? s12 : s11;", "const int64_t stride_channel_dst = ids ? s1 : s2;",
            "const int64_t stride_channel_y = ids ? s11 : s12;",
            "const int64_t ids_stride = ids ? ids->nb[1] / ggml_type_size(ids->type) : 0;",
            "const uint3 nchannels_y_fd = ids ? init_fastdiv_values(nchannels_y) : make_uint3(0, 0, 0);",
            "const uint3 channel_ratio_fd = ids ? make_uint3(0, 0, 0) : init_fastdiv_values(nchannels_dst / nchannels_x);",
            # one token keeps the mul_mat_vec_q path (more go to mul_mat_vec_q_moe), fused at one column
            "if (has_ids && ncols_dst > 1) {", "ggml_cuda_kernel_launch(mul_mat_vec_q<type, c_ncols_dst, true, small_k, "
                                               "halve_iters>, launch_params,",
            "const dim3 block_nums(nblocks, nchannels_dst, nsamples_or_ntokens);",
            "case GGML_GLU_OP_SWIGLU: result *= ggml_cuda_op_silu_single(gate_value); break;",
            "tmp_gate[j][i] += vec_dot_q_cuda( vgate, &y[j*stride_col_y + kby], kbx_offset + i*stride_row_x + kbx, kqs);"):
        assert line in text, line
    # The gate is the fusion's, vx the up matrix: H = up * silu(gate), as grouped's silu(gate) * up.
    assert "fuse gate, bias, scales, and glu_op into the up projection" in text
