"""fp16deq's wide candidates (fp16deq.cu "Wide candidates", scripts/fp16deq_tune.py): the prmt kvalue table
and its exact byte -> float conversion, host emulations of every candidate's index math against the
correctly rounded reference, and the tune family's dispatch."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from strata_bench.families import fp16deq as mod

KVALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.int64)
KV_BIASED = [0x3F2D1801, 0x766A5D4F, 0xA6998D81, 0xF1D9C5B5]  # fp16deq.cu kKvBiased
ROOT = Path(__file__).resolve().parents[2]


def _tune_module():
    from tests.cases_file import load_cases_file

    return load_cases_file("scripts/fp16deq_tune.py")


TUNE = _tune_module()


def byte_perm(x, y, s):
    """CUDA __byte_perm: byte i of the result is byte (s >> 4i) & 7 of the 8 bytes y:x."""
    x, y, s = (np.asarray(v, dtype=np.uint64) for v in (x, y, s))
    both = x | (y << np.uint64(32))
    out = np.zeros(np.broadcast(x, y, s).shape, dtype=np.uint64)
    for i in range(4):
        sel = (s >> np.uint64(4 * i)) & np.uint64(7)
        out |= ((both >> (sel * np.uint64(8))) & np.uint64(0xFF)) << np.uint64(8 * i)
    return out


def kv_bytes(w):
    """fp16deq::kv_bytes, step by step."""
    w = np.asarray(w, dtype=np.uint64)
    pick = np.uint64(0x32103210) | ((w & np.uint64(0x88888888)) >> np.uint64(1))
    mixed = []
    for i in range(2):
        sel = w >> np.uint64(16 * i)
        lo, hi = byte_perm(KV_BIASED[0], KV_BIASED[1], sel), byte_perm(KV_BIASED[2], KV_BIASED[3], sel)
        mixed.append(byte_perm(lo, hi, pick >> np.uint64(16 * i)))
    return byte_perm(mixed[0], mixed[1], 0x6420), byte_perm(mixed[0], mixed[1], 0x7531)


def test_biased_table_words_are_the_kvalues_plus_128():
    import gguf

    kv = np.asarray(gguf.quants.IQ4_NL.kvalues, dtype=np.int64).ravel()
    assert np.array_equal(kv, KVALUES)
    words = [int(sum(int(kv[4 * i + j] + 128) << (8 * j) for j in range(4))) for i in range(4)]
    assert words == KV_BIASED


def test_kv_bytes_looks_up_every_nibble_of_every_16_bit_half():
    rng = np.random.default_rng(0)
    low = np.arange(1 << 16, dtype=np.uint64)
    for w in (low | (rng.integers(0, 1 << 16, low.size).astype(np.uint64) << np.uint64(16)),
              (low << np.uint64(16)) | rng.integers(0, 1 << 16, low.size).astype(np.uint64)):
        lows, highs = kv_bytes(w)
        for j in range(4):
            byte = (w >> np.uint64(8 * j)) & np.uint64(0xFF)
            got_lo = ((lows >> np.uint64(8 * j)) & np.uint64(0xFF)).astype(np.int64) - 128
            got_hi = ((highs >> np.uint64(8 * j)) & np.uint64(0xFF)).astype(np.int64) - 128
            assert np.array_equal(got_lo, KVALUES[(byte & np.uint64(15)).astype(np.int64)])
            assert np.array_equal(got_hi, KVALUES[(byte >> np.uint64(4)).astype(np.int64)])


def test_magic_byte_to_float_is_exact():
    u = (KVALUES + 128).astype(np.uint32)
    as_float = (np.uint32(0x4B000000) | u).view(np.float32)
    assert np.array_equal(as_float - np.float32(8388736.0), KVALUES.astype(np.float32))


# --- index math of every candidate -----------------------------------------------------------------
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


def emulate_q8(config: mod.WideConfig, raw: np.ndarray, rows: int, cols: int) -> np.ndarray:
    flat = np.ascontiguousarray(raw).ravel()
    k_count, per_block = config.out // 8, 32 // config.out
    t = np.arange(rows * cols // config.out)
    blk, first = t // per_block, (t % per_block) * k_count
    base = blk * 34
    d = (flat[base].astype(np.uint16) | (flat[base + 1].astype(np.uint16) << 8)).view(np.float16).astype(np.float32)
    idx = base[:, None] + 2 + 8 * first[:, None] + np.arange(config.out)[None, :]
    vals = (d[:, None] * flat[idx].view(np.int8).astype(np.float32)).astype(np.float16)
    dst = (blk * 32 + 8 * first)[:, None] + np.arange(config.out)[None, :]
    out = np.full(rows * cols, np.nan, dtype=np.float16)
    out[dst.ravel()] = vals.ravel()
    return out.reshape(rows, cols)


@pytest.mark.parametrize("config", TUNE.CANDIDATES, ids=lambda c: c.label)
@pytest.mark.parametrize("shape", [(6, 512), (3, 256), (7, 768)])
@pytest.mark.parametrize("edge", [False, True])
def test_candidate_emulations_equal_the_correctly_rounded_reference(config, shape, edge):
    from strata_bench.data.synthetic import synthetic_weights

    rows, cols = shape
    raw = synthetic_weights(config.fmt, rows, cols, seed=13, edge=edge)
    if edge:
        raw = mod.with_subnormal_scales(config.fmt, raw)
    emulate = emulate_q8 if config.fmt == "q8_0" else emulate_xs
    with np.errstate(over="ignore"):
        got = emulate(config, raw, rows, cols)
    assert np.array_equal(got.astype(np.float64), mod.exact_fp16(config.fmt, raw))


def test_strided_stores_of_a_warp_are_consecutive_16_byte_chunks():
    (_, _, _, _, col), _ = xs_stores(mod.WideConfig("iq4_xs", 32, "strided", "prmt"), 8, 1024)
    per_store = col.reshape(4, -1)  # store k of every thread, threads in order
    blocks = np.arange(per_store.shape[1])
    for k in range(4):  # lane l of warp w writes block 4w + k at column 8 l
        assert np.array_equal(per_store[k] % 256, 8 * (blocks & 31))


# --- the tune family ---------------------------------------------------------------------------------
def test_tune_family_variants_and_kernel_names():
    family = TUNE.Fp16DeqTune()
    names = [v.name for v in family.variants]
    assert names[:2] == ["old", "new"] and len(set(names)) == len(names) == 2 + len(TUNE.CANDIDATES)
    assert mod.WideConfig("iq4_xs", 16, "strided", "prmt").kernel == "fp16deq_wide_iq4_xs<16, 1, 1>"
    assert mod.WideConfig("q8_0", 32).kernel == "fp16deq_wide_q8_0<32>"
    src = (ROOT / "kernels_src" / "fp16deq" / "fp16deq.cu").read_text()
    assert "fp16deq_wide_iq4_xs(" in src and "fp16deq_wide_q8_0(" in src
    for variant, config in zip(family.variants[2:], TUNE.CANDIDATES):
        kernels = variant.kernels(family, family.sources[0])
        assert config.kernel in kernels and len(set(kernels)) == len(kernels)  # new's own wide one once
    cases = list(family.default_cases())
    assert {(c.fmt, c.rows, c.cols) for c in cases} >= {("iq4_xs", 3, 256), ("q8_0", 7, 256)}


class _Kernels:
    def __init__(self):
        self.launched = []

    def get(self, name):
        return lambda grid, block, args, stream=None: self.launched.append((name, grid[0]))



@pytest.mark.parametrize("dst_ptr,expect", [(0x1000, "wide"), (0x1002, "generic")])
def test_launch_wide_takes_the_candidate_only_where_vec16_would_run(dst_ptr, expect):
    family = TUNE.Fp16DeqTune()
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
