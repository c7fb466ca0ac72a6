"""convert.py: the dequantization kernels ggml's dequantize_row_*_cuda launch (names per kind, grid, block,
arguments) and quantize_row_q8_1_cuda's launch, value by value without a GPU; on the pinned real tree,
each per-block kernel's threads and arguments as its host function launches them."""
from __future__ import annotations

import re

import pytest

from strata_bench.ggml import convert
from strata_bench.ggml.launch import I32, I64, U32, UINT3
from strata_bench.ggml.tree import CONVERT, locate

K = 4 * 512
W, Y = object(), object()
ONE = (1, 0, 1)


def _values(launch):
    return tuple(p.value for p in launch.params)


@pytest.mark.parametrize("fmt,name", [
    ("q8_0", "dequantize_block<32, 1, &dequantize_q8_0, float>"),
    ("q5_0", "dequantize_block<32, 2, &dequantize_q5_0, float>"),
    ("q5_1", "dequantize_block<32, 2, &dequantize_q5_1, float>"),
    ("q4_0", "dequantize_block_q4_0<float>"), ("iq4_nl", "dequantize_block_iq4_nl<float>"),
    ("q4_k", "dequantize_block_q4_K<float>"), ("q2_k", "dequantize_block_q2_K<float>"),
    ("q6_k", "dequantize_block_q6_K<float>"), ("iq2_xxs", "dequantize_block_iq2_xxs<float>"),
    ("iq4_xs", "dequantize_block_iq4_xs<float>")])
def test_kernel_names(fmt, name):
    assert convert.dequant_kernel(fmt) == name


@pytest.mark.parametrize("fmt,grid,block,values", [
    ("q8_0", 4, 256, (W, Y, K, 1, 1, ONE, 64, 64, 64)),  # ne00 ne01 ne0203 ne02 s01 s02 s03: one row of k
    ("q4_0", 8, 32, (W, Y, 64)),  # a CUDA block per 256 values, the count of 32-value blocks
    ("q4_k", 8, 32, (W, Y)),
    ("q2_k", 8, 64, (W, Y)),
    ("iq2_xxs", 8, 32, (W, Y)),
])
def test_dequant_plans(fmt, grid, block, values):
    launch = convert.dequant_plan(fmt, K, W, Y)
    assert launch.kernel == convert.dequant_kernel(fmt)
    assert (launch.grid, launch.block) == ((grid, 1, 1), (block, 1, 1))
    assert _values(launch) == values
    assert tuple((p.label, p.ctype) for p in launch.params) == convert.dequant_signature(fmt)


def test_signatures_per_kind():
    assert [label for label, _ in convert.dequant_signature("q8_0")] == [
        "vx", "y", "ne00", "ne01", "ne0203", "ne02", "s01", "s02", "s03"]
    assert [t for _, t in convert.dequant_signature("q8_0")][2:] == [I64, I64, I64, UINT3, I64, I64, I64]
    assert convert.dequant_signature("q4_0")[2] == ("nb32", I32)
    assert len(convert.dequant_signature("iq2_xxs")) == 2


def test_counted_and_generic_grids_round_up():
    assert convert.dequant_plan("q4_0", 288, W, Y).grid == (2, 1, 1)
    assert _values(convert.dequant_plan("q4_0", 288, W, Y)) == (W, Y, 9)
    assert convert.dequant_plan("q8_0", 544, W, Y).grid == (2, 1, 1)


def test_quantize_plan():
    x, q8 = object(), object()
    launch = convert.quantize_plan(3, 544, x, q8)
    assert launch.kernel == "quantize_q8_1"
    assert (launch.grid, launch.block) == ((3, 3, 1), (256, 1, 1))
    # x vy ne00 s01 s02 s03 ne0 ne1 ne2: rows of `cols` floats, one channel and sample
    assert _values(launch) == (x, q8, 544, 544, 3 * 544, 3 * 544, 544, 3, ONE)
    assert [t for _, t in convert.QUANTIZE_SIGNATURE][2:] == [I64, I64, I64, I64, I64, U32, UINT3]


def test_the_real_tree_launches_as_the_plans_do(real_tree):
    """Each format's host function in convert.cu: the kernel it launches with its threads and arguments, or
    the generic dequantize_block_cont_cuda with the plan's qk and qr."""
    tree = locate(real_tree)
    text = (real_tree / CONVERT).read_text()
    for fmt in tree.formats:
        name = convert.ggml_name(fmt)
        launch = convert.dequant_plan(fmt, K, W, Y)
        if fmt in convert.GENERIC:
            qk = name[1:].upper()
            expect = f"return dequantize_block_cont_cuda<QK{qk}, QR{qk}, dequantize_{name}>;"
            assert expect in text, fmt
            assert (convert.GENERIC[fmt][1], launch.block[0]) == (tree.qr[fmt], 256)
            continue
        body = re.search(rf"static void dequantize_row_{name}_cuda\(.*?\n}}", text, re.S).group(0)
        threads, args = re.search(rf"dequantize_block_{name}<<<nb, (\d+), 0, stream>>>\(([^)]*)\)", body).groups()
        assert int(threads) == launch.block[0], fmt
        assert len(args.split(",")) == len(launch.params), fmt
