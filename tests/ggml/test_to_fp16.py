"""to_fp16.py and fp16deq's variant ggml without a GPU: the launches of ggml's to-FP16 kernels (instance,
grid, block, arguments), the aligned copy q8_0's int loads need, the cases the variant runs; on the pinned
real tree, the host functions' launches and the arithmetic that makes the variant bitwise fp16deq's
reference (its error model: none, held to `old`'s bits), emulated on the family's own inputs."""
from __future__ import annotations

import re
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from strata_bench.families.fp16deq import exact_fp16
from strata_bench.ggml import to_fp16
from strata_bench.ggml.tree import CONVERT, locate
from strata_bench.ggml.variants import attach

W, Y = object(), object()


def _values(launch):
    return tuple(p.value for p in launch.params)


@pytest.mark.parametrize("fmt,k,kernel,grid,values", [
    ("q8_0", 96 * 4096, "dequantize_block_q8_0_f16<false>", 192, (W, Y, 96 * 4096)),
    ("q8_0", 50 * 1056, "dequantize_block_q8_0_f16<true>", 26, (W, Y, 50 * 1056)),  # 52800 % 2048 = 1600
    ("q8_0", 64 * 1536, "dequantize_block_q8_0_f16<false>", 48, (W, Y, 64 * 1536)),
    ("iq4_xs", 50 * 2304, "dequantize_block_iq4_xs<__half>", 450, (W, Y)),
])
def test_plans(fmt, k, kernel, grid, values):
    launch = to_fp16.plan(fmt, k, 2048, W, Y)
    assert (launch.kernel, launch.grid, launch.block) == (kernel, (grid, 1, 1), (32, 1, 1))
    assert _values(launch) == values
    assert tuple((p.label, p.ctype) for p in launch.params) == to_fp16.signature(kernel)


def test_the_tree_sets_the_q8_0_kernels_span():
    launch = to_fp16.plan("q8_0", 4096, 1024, W, Y)
    assert (launch.kernel, launch.grid) == ("dequantize_block_q8_0_f16<false>", (4, 1, 1))


def test_instances_and_signatures():
    assert to_fp16.instances(("q8_0", "iq4_xs")) == [
        "dequantize_block_q8_0_f16<false>", "dequantize_block_q8_0_f16<true>", "dequantize_block_iq4_xs<__half>"]
    assert to_fp16.instances(("iq4_xs",)) == ["dequantize_block_iq4_xs<__half>"]
    assert [(label, t.name, t.size) for label, t in to_fp16.signature("dequantize_block_q8_0_f16<true>")] == [
        ("vx", "void*", 8), ("y", "__half*", 8), ("k", "int64_t", 8)]
    assert [label for label, _ in to_fp16.signature("dequantize_block_iq4_xs<__half>")] == ["vx", "yy"]


@pytest.mark.parametrize("fmt,start,nbytes,total,copy", [
    ("q8_0", 0, 64 * 2176, 64 * 2176, False),
    ("q8_0", 37 * 1122, 50 * 1122, 128 * 1122, True),    # row 37 of 34-byte blocks: 2-byte aligned
    ("q8_0", 36 * 1122, 50 * 1122, 128 * 1122, False),   # 4-byte aligned, the last int inside the tensor
    ("q8_0", 78 * 1122, 49 * 1122, 127 * 1122, True),    # 4-byte aligned, the last int 2 bytes past the end
    ("iq4_xs", 37 * 1224, 50 * 1224, 128 * 1224, False),
])
def test_q8_0_needs_an_aligned_copy_where_its_int_loads_would_not_be(fmt, start, nbytes, total, copy):
    assert to_fp16.needs_aligned_copy(fmt, start, nbytes, total) is copy


@pytest.fixture
def numpy_cupy(monkeypatch):
    """aligned_copy's cupy: numpy (the copy it makes is the same)."""
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(zeros=np.zeros, uint8=np.uint8))


def test_the_variant_runs_contiguous_outputs_from_an_aligned_copy(families, fake_tree, numpy_cupy):
    tree = locate(fake_tree)
    attach(families, tree)
    family = families["fp16deq"]
    variant = family.variant("ggml")
    unit = f"{tree.path(CONVERT)}@ggml"
    assert variant.formats == ("q8_0",)  # the fake tree has no QR or VDR for iq4_xs
    assert variant.kernels(family, unit) == to_fp16.instances(("q8_0",)) and variant.error_model is None
    assert variant.kernels(family, family.sources[0]) == []
    case = family.path_case("q8_0", 50, 1056, "seed:3", "vec16", row0=37, of=128)
    assert family.runs(variant, case)
    assert not family.runs(variant, family.path_case("q8_0", 40, 2048, "seed:4", "vec16", ld=2056))
    assert not family.runs(variant, family.path_case("q8_0", 40, 2048, "edge:6", "generic", offset=1))
    w = np.arange(128 * 1122, dtype=np.int64).astype(np.uint8).reshape(128, 1122)
    dev = {"w": w, **variant.prepare(family, case, {"w": w})}
    np.testing.assert_array_equal(dev["ggml_w"], w[37:87].reshape(-1))  # 56100 bytes: whole ints
    odd = family.path_case("q8_0", 49, 1056, "seed:3", "vec16", row0=78, of=127)
    padded = variant.prepare(family, odd, {"w": w[:127]})["ggml_w"]
    assert padded.shape == (49 * 1122 + 2,)  # to a multiple of 4 bytes, zero-padded
    np.testing.assert_array_equal(padded[:-2], w[78:127].reshape(-1))
    assert not padded[-2:].any()
    calls = []

    def in_source(source, name):
        assert source == unit
        return lambda grid, block, args, stream=None: calls.append((name, grid, block, args))

    y = np.zeros((50, 1056), np.float16)
    variant.launch(family, case, SimpleNamespace(in_source=in_source), dev, {"y": y})
    ((name, grid, block, args),) = calls
    assert (name, grid, block) == ("dequantize_block_q8_0_f16<true>", (26, 1, 1), (32, 1, 1))
    assert args[0] is dev["ggml_w"] and args[1] is y and args[2] == np.int64(52800)


def test_an_aligned_source_is_launched_in_place(families, fake_tree):
    attach(families, locate(fake_tree))
    family = families["fp16deq"]
    case = family.path_case("q8_0", 50, 1056, "seed:3", "vec16", row0=36, of=128)
    assert family.variant("ggml").prepare(family, case, {"w": np.zeros((128, 1122), np.uint8)}) == {}


@pytest.mark.parametrize("cc,refused", [("52", True), ("60", False), ("90", False)])
def test_a_device_without_fast_fp16_is_refused(families, fake_tree, cc, refused):
    from strata_bench.errors import InputError

    attach(families, locate(fake_tree))
    family = families["fp16deq"]
    case = family.path_case("q8_0", 64, 2048, "seed:1", "vec16")
    w = SimpleNamespace(device=SimpleNamespace(compute_capability=cc), nbytes=64 * 2176)
    if not refused:
        assert family.variant("ggml").prepare(family, case, {"w": w}) == {}
        return
    with pytest.raises(InputError) as err:
        family.variant("ggml").prepare(family, case, {"w": w})
    assert str(err.value) == ("--ggml: on compute capability 5.x ggml converts q8_0 to FP16 with another kernel "
                              "than dequantize_block_q8_0_f16 (fp16_available needs 6.0); the adapter launches only "
                              "that one")


# --- the pinned tree ------------------------------------------------------------------------------------------
def _body(text: str, head: str) -> str:
    return re.search(rf"{re.escape(head)}.*?\n}}\n", text, re.S).group(0)


def test_the_real_tree_launches_as_the_plans_do(real_tree):
    tree = locate(real_tree)
    assert to_fp16.lacking(tree) is None and to_fp16.ne_align(tree) == 2048
    text = (real_tree / CONVERT).read_text()
    to_half = _body(text, "to_fp16_cuda_t ggml_get_to_fp16_cuda(ggml_type type)")
    assert re.search(r"case GGML_TYPE_Q8_0:\s*if \(fp16_available\([^\n]*\n\s*return dequantize_block_q8_0_f16_cuda;",
                     to_half)
    assert re.search(r"case GGML_TYPE_IQ4_XS:\s*return dequantize_row_iq4_xs_cuda;", to_half)
    q8_0 = _body(text, "static void dequantize_block_q8_0_f16_cuda(")
    assert "const int num_blocks = (k + CUDA_Q8_0_NE_ALIGN - 1) / CUDA_Q8_0_NE_ALIGN;" in q8_0
    assert re.search(r"if \(k % CUDA_Q8_0_NE_ALIGN == 0\) \{\s*const bool need_check = false;", q8_0)
    assert q8_0.count("dequantize_block_q8_0_f16<need_check><<<num_blocks, WARP_SIZE, 0, stream>>>(vx, y, k);") == 2
    iq4_xs = _body(text, "static void dequantize_row_iq4_xs_cuda(")
    assert "const int nb = (k + QK_K - 1) / QK_K;" in iq4_xs
    assert "dequantize_block_iq4_xs<<<nb, 32, 0, stream>>>(vx, y);" in iq4_xs
    # The q8_0 kernel's shared copy: NE_ALIGN values' blocks plus a warp of ints, read as ints.
    assert "constexpr int nint = CUDA_Q8_0_NE_ALIGN/sizeof(int) + WARP_SIZE;" in text
    assert (2048 // 4 + 32) * 4 == 2048 // 32 * 34  # 64 blocks of 34 bytes: the source is read in whole ints


def _q8_0_like_ggml(raw: np.ndarray) -> np.ndarray:
    """`__hmul2(make_half2(qs.x, qs.y), __half2half2(d))`: the codes and d as halves, one fp16 product (numpy's
    float16 multiply rounds the exact float32 product once, as the device's fp16 multiply does)."""
    blocks = raw.reshape(raw.shape[0], -1, 34)
    d = blocks[..., :2].copy().view(np.float16)
    q = blocks[..., 2:].copy().view(np.int8).astype(np.float16)
    with np.errstate(over="ignore"):
        return (q * d).reshape(raw.shape[0], -1)


def _iq4_xs_like_ggml(raw: np.ndarray, round_scale: bool = False) -> np.ndarray:
    """dequantize_iq4_xs<half>: d = float(x.d) * (ls - 32) in fp32, then half(d * kvalues_iq4nl[code]);
    `round_scale`: d rounded to fp16 first (a second rounding, which ggml does not make)."""
    from strata_bench.formats import get_format

    kvalues = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.float32)
    blocks = raw.reshape(raw.shape[0], -1, 136)
    d16 = blocks[..., :2].copy().view(np.float16)[..., 0].astype(np.float32)
    scales_h = blocks[..., 2:4].copy().view(np.uint16)[..., 0].astype(np.int64)
    scales_l = blocks[..., 4:8].astype(np.int64)
    qs = blocks[..., 8:].astype(np.int64).reshape(*blocks.shape[:2], 8, 16)
    out = np.empty((*blocks.shape[:2], 8, 32), np.float16)
    for ib in range(8):
        ls = ((scales_l[..., ib // 2] >> 4 * (ib % 2)) & 0xF) | (((scales_h >> 2 * ib) & 3) << 4)
        d = d16 * (ls - 32).astype(np.float32)
        if round_scale:
            with np.errstate(over="ignore"):
                d = d.astype(np.float16).astype(np.float32)
        with np.errstate(over="ignore"):
            out[..., ib, :16] = (d[..., None] * kvalues[qs[..., ib, :] & 0xF]).astype(np.float16)
            out[..., ib, 16:] = (d[..., None] * kvalues[qs[..., ib, :] >> 4]).astype(np.float16)
    assert get_format("iq4_xs").block_size == 256
    return out.reshape(raw.shape[0], -1)


LIKE_GGML = {"q8_0": _q8_0_like_ggml, "iq4_xs": _iq4_xs_like_ggml}


@pytest.mark.parametrize("fmt", ["q8_0", "iq4_xs"])
def test_ggmls_arithmetic_is_the_references_rounding_on_every_case(real_tree, families, fmt):
    """The premise of the variant's model (none: bitwise `old`): the pinned tree's kernels compute as emulated
    here, and that emulation equals fp16deq's reference on every case the variant runs, edge data (subnormal
    scales, overflow) included: bit for bit where the value is not zero, and as a value where it is (a code
    of 0 times a negative d is -0.0 in ggml's fp16 product as in old's fp32 one; the reference's zero is +0.0
    and its tolerance compares values)."""
    text = (real_tree / CONVERT).read_text() + (real_tree / "src/ggml-cuda/dequantize.cuh").read_text()
    assert "y2[iy/2 + threadIdx.x] = __hmul2(make_half2(qs.x, qs.y), __half2half2(d));" in text
    assert ("const float d = (float)x[ibs].d * ((((x[ibs].scales_l[ib/2] >> 4*(ib%2)) & 0xf) | "
            "(((x[ibs].scales_h >> 2*ib) & 3) << 4)) - 32);") in text
    assert "y[j+ 0] = ggml_cuda_cast<dst_t>(d * kvalues_iq4nl[q4[j] & 0xf]);" in text
    attach(families, locate(real_tree))
    family = families["fp16deq"]
    cases = [c for c in family.default_cases() if c.fmt == fmt and "ggml" in c.variants]
    assert len(cases) == 4
    for case in cases:
        geo = family.geometry(case)
        raw = family.make_inputs(case)["w"][geo["row0"]:geo["row0"] + case.rows]
        got = LIKE_GGML[fmt](raw)
        ref = exact_fp16(fmt, raw).astype(np.float16)
        np.testing.assert_array_equal(got, ref, err_msg=case.name)  # values: +-0 alike
        nonzero = ref != 0
        np.testing.assert_array_equal(got[nonzero].view(np.uint16), ref[nonzero].view(np.uint16), err_msg=case.name)


def test_a_second_rounding_would_be_caught(families):
    """The comparison above can fail: rounding iq4_xs's d * (ls - 32) to fp16 first (one rounding more than
    ggml's) changes some halves of a seeded case."""
    family = families["fp16deq"]
    raw = family.make_inputs(family.path_case("iq4_xs", 96, 4096, "seed:1", "vec16"))["w"]
    ref = exact_fp16("iq4_xs", raw).astype(np.float16)
    assert (_iq4_xs_like_ggml(raw) == ref).all()
    assert (_iq4_xs_like_ggml(raw, round_scale=True) != ref).sum() > 0


@pytest.mark.nvrtc
def test_the_real_trees_to_fp16_instances_compile_and_match_their_launches(nvrtc_compile):
    """convert.cu built by NVRTC (about 2 s): each instance the variant lists is found and its parameters
    checked against its launch's (to_fp16.signature), `half` found as the __half it names."""
    compiled = nvrtc_compile("fp16deq", CONVERT, to_fp16.instances(to_fp16.FORMATS))
    assert compiled.lowered == {
        "dequantize_block_q8_0_f16<false>": "_Z25dequantize_block_q8_0_f16ILb0EEvPKvP6__halfl",
        "dequantize_block_q8_0_f16<true>": "_Z25dequantize_block_q8_0_f16ILb1EEvPKvP6__halfl",
        "dequantize_block_iq4_xs<__half>": "_Z23dequantize_block_iq4_xsI6__halfEvPKvPT_"}
