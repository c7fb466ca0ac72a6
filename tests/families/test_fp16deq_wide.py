"""fp16deq's wide 16-byte-store kernel (fp16deq.cu, "Wide 16-byte-store kernels"): a host emulation of its
index math for each mapping against the correctly rounded reference (the configs "new" launches, VEC16_WIDE;
experiments/fp16deq_tune runs the same emulation over its candidates), and launch_wide's dispatch."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from strata_bench.families import fp16deq as mod

KVALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.int64)
ROOT = Path(__file__).resolve().parents[2]


# --- index math of a wide IQ4_XS kernel ----------------------------------------------------------------------
def xs_stores(config: mod.WideConfig, rows: int, cols: int):
    """Per 16-byte store of an IQ4_XS candidate: (block, sub-block, first qs byte, nibble shift, out col)."""
    bpr, blocks = cols // 256, rows * cols // 256
    threads = -(-rows * cols // config.out // 256) * 256
    t = np.arange(threads)
    pieces = []
    if config.mapping == "strided" or config.out == 8:
        k_count = config.out // 8
        first = (t >> 5) * 32 * k_count + (t & 31)
        for k in range(k_count):
            octet = first + 32 * k
            blk, within = octet >> 5, octet & 31
            ib, quarter = within >> 2, within & 3
            pieces.append((blk, ib, 16 * ib + 8 * (quarter & 1), 4 * (quarter >> 1), 8 * within))
    else:
        halves, per_block = config.out // 16, 256 // config.out
        blk, part = t // per_block, t % per_block
        ib, h0 = part // (2 // halves), (part % (2 // halves)) * halves
        for h in range(halves):
            for shift, extra in ((0, 0), (4, 16)):
                pieces.append((blk, ib, 16 * ib + 8 * (h0 + h), shift, 32 * ib + 8 * (h0 + h) + extra))
    out = []
    for blk, ib, qs0, shift, col in pieces:
        keep = blk < blocks
        out.append((blk[keep], ib[keep], qs0[keep], np.broadcast_to(shift, blk.shape)[keep], col[keep]))
    return [np.concatenate(parts) for parts in zip(*out)], bpr


def emulate_xs(config: mod.WideConfig, raw: np.ndarray, rows: int, cols: int) -> np.ndarray:
    flat = np.ascontiguousarray(raw).ravel()
    (blk, ib, qs0, shift, col), bpr = xs_stores(config, rows, cols)
    base = blk * 136
    d = (flat[base].astype(np.uint16) | (flat[base + 1].astype(np.uint16) << 8)).view(np.float16).astype(np.float32)
    scales_h = flat[base + 2].astype(np.int64) | (flat[base + 3].astype(np.int64) << 8)
    ls = ((flat[base + 4 + (ib >> 1)].astype(np.int64) >> (4 * (ib & 1))) & 15) | (((scales_h >> (2 * ib)) & 3) << 4)
    scale = d * (ls - 32).astype(np.float32)
    qs = flat[base[:, None] + 8 + qs0[:, None] + np.arange(8)[None, :]]
    codes = (qs >> shift[:, None].astype(np.uint8)) & 15
    vals = (scale[:, None] * KVALUES.astype(np.float32)[codes]).astype(np.float16)
    out = np.full((rows, cols), np.nan, dtype=np.float16)
    row, colblk = blk // bpr, blk % bpr
    idx = (row * cols + colblk * 256 + col)[:, None] + np.arange(8)[None, :]
    written = np.zeros(rows * cols, dtype=np.int64)
    np.add.at(written, idx.ravel(), 1)
    assert (written == 1).all()  # every output written exactly once
    out.reshape(-1)[idx.ravel()] = vals.ravel()
    return out


def assert_emulation_is_the_reference(config: mod.WideConfig, emulate, shape: tuple[int, int], edge: bool) -> None:
    """The emulated kernel's fp16 outputs equal the exact values rounded once (fp16deq.cu's contract)."""
    from strata_bench.data.synthetic import synthetic_weights

    rows, cols = shape
    raw = synthetic_weights(config.fmt, rows, cols, seed=13, edge=edge)
    if edge:
        raw = mod.with_subnormal_scales(config.fmt, raw)
    with np.errstate(over="ignore"):
        got = emulate(config, raw, rows, cols)
    assert np.array_equal(got.astype(np.float64), mod.exact_fp16(config.fmt, raw))


SHAPES = [(6, 512), (3, 256), (7, 768)]


@pytest.mark.parametrize("config", list(mod.VEC16_WIDE.values()), ids=lambda c: c.label)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("edge", [False, True])
def test_the_wide_kernel_new_launches_emulates_to_the_correctly_rounded_reference(config, shape, edge):
    assert_emulation_is_the_reference(config, emulate_xs, shape, edge)


def test_the_wide_kernel_is_in_fp16deq_cu_with_its_name():
    assert mod.WideConfig("iq4_xs", 16, "own", "shared").kernel == "fp16deq_wide_iq4_xs<16, 0, 0>"
    assert mod.WideConfig("iq4_xs", 16, "strided", "prmt").kernel == "fp16deq_wide_iq4_xs<16, 1, 1>"
    assert mod.WideConfig("q8_0", 32).kernel == "fp16deq_wide_q8_0<32>"
    assert "fp16deq_wide_iq4_xs(" in (ROOT / "kernels_src" / "fp16deq" / "fp16deq.cu").read_text()


# --- launch_wide: "new"'s dispatch with a wide kernel in place of vec16 -----------------------------------------
class _Kernels:
    def __init__(self):
        self.launched = []

    def get(self, name):
        return lambda grid, block, args, stream=None: self.launched.append((name, grid[0]))


@pytest.mark.parametrize("dst_ptr,expect", [(0x1000, "wide"), (0x1002, "generic")])
def test_launch_wide_takes_the_candidate_only_where_vec16_would_run(dst_ptr, expect):
    family = mod.Fp16Deq()
    config = mod.WideConfig("iq4_xs", 32, "own", "prmt")
    case = family.path_case("iq4_xs", 8, 512, "seed:1", "vec16")
    rows = SimpleNamespace(data=SimpleNamespace(ptr=0x2000))
    family._rows = lambda c, d: rows
    kernels = _Kernels()
    family.launch_wide(case, config.label, config, kernels, {}, {"y": SimpleNamespace(data=SimpleNamespace(ptr=dst_ptr))})
    name, grid = kernels.launched[0]
    if expect == "wide":
        assert (name, grid) == (config.kernel, 8 * 512 // 32 // 256 + 1)
        assert family.dispatch_log[(case.name, config.label)] == config.label
    else:
        assert name == "fp16deq_generic_iq4_xs" and family.dispatch_log[(case.name, config.label)] == "generic"
    other = family.path_case("q8_0", 8, 512, "seed:1", "vec16")
    family.launch_wide(other, config.label, config, kernels, {}, {"y": SimpleNamespace(data=SimpleNamespace(ptr=0x1000))})
    assert kernels.launched[-1][0] == "fp16deq_vec16_q8_0"
