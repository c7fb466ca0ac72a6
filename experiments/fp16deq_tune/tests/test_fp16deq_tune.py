"""experiments/fp16deq_tune: the prmt kvalue table of its kernels (kept in fp16deq.cu) and its exact byte ->
float conversion, host emulations of every candidate's index math against the correctly rounded reference
(tests/families/test_fp16deq_wide.py's emulation of the wide IQ4_XS kernel, and the wide Q8_0 kernel's here),
and the tune family's variants."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from strata_bench.families import fp16deq as mod
from tests.cases_file import load_cases_file
from tests.families.test_fp16deq_wide import KVALUES, SHAPES, assert_emulation_is_the_reference, emulate_xs, xs_stores

ROOT = Path(__file__).resolve().parents[3]
TUNE = load_cases_file("experiments/fp16deq_tune/cases.py")
KV_BIASED = [0x3F2D1801, 0x766A5D4F, 0xA6998D81, 0xF1D9C5B5]  # fp16deq.cu kKvBiased


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


def test_the_biased_words_are_fp16deq_cus():
    src = (ROOT / "kernels_src" / "fp16deq" / "fp16deq.cu").read_text()
    assert "constexpr unsigned kKvBiased[4] = {" + ", ".join(f"0x{w:08x}u" for w in KV_BIASED) + "};" in src


# --- index math of every candidate -----------------------------------------------------------------
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
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("edge", [False, True])
def test_candidate_emulations_equal_the_correctly_rounded_reference(config, shape, edge):
    assert_emulation_is_the_reference(config, emulate_q8 if config.fmt == "q8_0" else emulate_xs, shape, edge)


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
    assert family.sources == ("fp16deq/fp16deq.cu", "fp16deq_wide.cu") and family.kernels_root == TUNE.KERNELS
    src = (TUNE.KERNELS / "fp16deq_wide.cu").read_text()
    assert '#include "fp16deq/fp16deq.cu"' in src and "fp16deq_wide_q8_0(" in src and "XsLut<kLutPrmt>" in src
    built_in = family.new_kernels("fp16deq/fp16deq.cu")
    for variant, config in zip(family.variants[2:], TUNE.CANDIDATES):
        own = variant.kernels(family, "fp16deq_wide.cu")
        assert variant.kernels(family, "fp16deq/fp16deq.cu") == built_in  # new's, for the paths it runs there
        assert own == ([] if config.kernel in built_in else [config.kernel])  # new's own wide one from there
    assert family.name_expressions("fp16deq_wide.cu") == [c.kernel for c in TUNE.CANDIDATES if c.kernel not in built_in]
    assert family.name_expressions("fp16deq/fp16deq.cu") == mod.Fp16Deq().name_expressions("fp16deq/fp16deq.cu")
    cases = list(family.default_cases())
    assert {(c.fmt, c.rows, c.cols) for c in cases} >= {("iq4_xs", 3, 256), ("q8_0", 7, 256)}


@pytest.mark.slow  # an NVRTC compile of every candidate
@pytest.mark.nvrtc
def test_every_candidate_compiles_from_this_folder():
    from strata_bench.kernels.build import compile_source

    family = TUNE.Fp16DeqTune()
    exprs = family.name_expressions(TUNE.OWN_SOURCE)
    built = compile_source(TUNE.OWN_SOURCE, exprs, "sm_90", root=TUNE.KERNELS)
    assert set(exprs) <= set(built.lowered) and len(exprs) == len(TUNE.CANDIDATES) - 1
