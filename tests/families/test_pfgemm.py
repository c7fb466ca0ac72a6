"""pfgemm family: compile checks, case lists, dispatcher, float64 reference and tolerance, and bit-exact
Python models of the new kernel's decoders (the GPU parity run is the GPU test at the end)."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.cases import Case

from strata_bench.families import load_builtin_families
from strata_bench.errors import InputError
from strata_bench.families import pfgemm as pf
from strata_bench.formats import get_format

FAMILY = load_builtin_families()["pfgemm"]


def small_case(fmt: str, n: int, k: int, groups: str, seed: int = 3) -> Case:
    return FAMILY.expert_case(fmt, n, k, groups, f"seed:{seed}")


# --- compile -------------------------------------------------------------------------------------------
@pytest.mark.nvrtc
@pytest.mark.parametrize("source", pf.PfGemm.sources)
def test_sources_compile_for_sm90_without_spills_in_48k_static_shared(source, cubin_cache):
    from strata_bench.kernels import build

    compiled = build.compile_source(source, FAMILY.name_expressions(source), "sm_90", use_cache=False)
    resources = build.parse_resources(compiled.log, compiled.lowered)
    assert {r.kernel for r in resources} == set(FAMILY.name_expressions(source))
    for r in resources:
        assert r.spill_stores == 0 and r.spill_loads == 0, r
        assert r.shared_bytes <= 48 * 1024, r
        assert r.registers <= 128, r  # two 256-thread blocks per SM


# --- cases -----------------------------------------------------------------------------------------------
def test_default_cases_cover_both_shapes_formats_and_fallbacks():
    cases = list(FAMILY.default_cases())
    shapes = {(c.fmt, c.rows, c.cols): c for c in cases}
    for key in (("iq2_s", 1280, 2560), ("iq4_nl", 1280, 2560), ("iq4_nl", 2560, 640)):
        assert shapes[key].variants == ("old", "new", "auto")
    # K = 640 is not a whole number of IQ2_S super-blocks: the down-like IQ2_S case uses K = 1024.
    assert shapes[("iq2_s", 2560, 1024)].variants == ("old", "new", "auto")
    for c in cases:
        sizes = pf.group_sizes(c)
        assert sizes.sum() == c.ncols
        assert (sizes == 0).any() and (sizes % 16 != 0).any() and ((sizes > 0) & (sizes < 16)).any()
        if not pf.new_supports(c.fmt, c.rows, c.cols):
            assert "new" not in c.variants and FAMILY.kernel_for(c, "auto") == "old"
    assert all(c.variants == ("old", "auto") for c in cases if c.fmt == "q2_0")
    assert not any(c.param("bench") for c in cases)


def test_a_variant_a_run_adds_joins_the_cases_it_runs_those_that_list_their_variants_too():
    from strata_bench.cases import Variant

    family = FAMILY.copy()
    family.add_variant(Variant("foreign", lambda f, s: [], lambda *a: None, formats=("iq4_nl",),
                               applies=lambda case: case.rows % 128 == 0))
    variants = {(c.fmt, c.rows, c.cols): c.variants for c in family.default_cases()}
    assert variants[("iq4_nl", 256, 608)] == ("old", "auto", "foreign")  # listed ("old", "auto"), and runs it
    assert variants[("iq4_nl", 144, 512)] == ("old", "auto")  # its `applies` says no
    assert variants[("q2_0", 1280, 2560)] == ("old", "auto")  # not its format
    assert variants[("iq4_nl", 1280, 2560)] == ("old", "new", "auto", "foreign")


def test_bench_case_is_8192_tokens_over_128_experts_with_gemm_flops():
    cases = list(FAMILY.bench_cases())
    assert cases and all(c.param("bench") for c in cases)
    for c in cases:
        sizes = pf.group_sizes(c)
        assert sizes.size == 128 and c.ncols == 8192
        assert FAMILY.flops(c) == 2 * 8192 * c.rows * c.cols
        assert FAMILY.kernel_for(c, "auto") == "new"
    assert {(c.fmt, c.rows, c.cols) for c in cases} >= {("iq2_s", 1280, 2560), ("iq4_nl", 2560, 1280)}


def test_bytes_moved_counts_only_experts_with_tokens():
    c = small_case("iq4_nl", 128, 256, "0,3,0,5")
    row_bytes = get_format("iq4_nl").bytes_per_row(256)
    assert FAMILY.bytes_moved(c) == 2 * 128 * row_bytes + 8 * 256 * 2 + 8 * 128 * 4 + 5 * 4


def test_groups_and_data_errors_are_input_errors():
    with pytest.raises(InputError):
        pf.group_sizes_of("1,-2")
    with pytest.raises(InputError):
        pf.group_sizes_of("ax3")
    with pytest.raises(InputError):
        FAMILY.make_inputs(FAMILY.expert_case("iq2_s", 128, 512, "3,4", "edge:1"))
    with pytest.raises(InputError):
        FAMILY.make_inputs(Case("pfgemm", "iq2_s", 128, 512, 9, "seed:1", params=(("groups", "3,4"),)))


# --- dispatcher ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt,n,k,expected", [
    ("iq2_s", 1280, 2560, "new"), ("iq2_s", 1280, 768, "old"), ("iq2_s", 1280, 256, "old"),
    ("iq4_nl", 2560, 640, "new"), ("iq4_nl", 2560, 608, "old"), ("iq4_nl", 144, 512, "old"),
    ("q2_0", 1280, 2560, "old"),
])
def test_auto_takes_new_exactly_where_it_applies(fmt, n, k, expected):
    assert pf.choose_kernel(fmt, n, k, env={}) == expected


def test_environment_switch_forces_either_kernel_and_rejects_impossible_or_bad_values():
    assert pf.choose_kernel("iq2_s", 1280, 2560, env={"STRATA_PF_WMMA2": "0"}) == "old"
    assert pf.choose_kernel("iq2_s", 1280, 2560, env={"STRATA_PF_WMMA2": "1"}) == "new"
    with pytest.raises(InputError):
        pf.choose_kernel("q2_0", 1280, 2560, env={"STRATA_PF_WMMA2": "1"})
    with pytest.raises(InputError):
        pf.choose_kernel("iq2_s", 1280, 2560, env={"STRATA_PF_WMMA2": "yes"})


def test_variant_new_on_an_unsupported_case_is_an_input_error():
    with pytest.raises(InputError):
        FAMILY.kernel_for(small_case("q2_0", 128, 256, "1,2"), "new")


# --- reference and tolerance -------------------------------------------------------------------------------
def test_exact_weights_match_the_generic_float64_dequantization():
    rng = np.random.default_rng(5)
    for fmt in pf.FORMAT_IDS:
        f = get_format(fmt)
        raw = f.random_blocks(rng, 64).reshape(4, -1)
        np.testing.assert_array_equal(pf.exact_weights(fmt, raw), f.dequantize_f64(raw))


def test_reference_equals_a_slow_loop_over_tokens_and_rows():
    case = small_case("iq2_s", 16, 512, "2,0,3,1")
    host = FAMILY.make_inputs(case)
    ref = FAMILY.reference(case, host)[0]
    w = get_format("iq2_s").dequantize_f64(host["w"])  # (experts * 16, 512)
    offsets = host["offsets"]
    for e in range(4):
        for t in range(offsets[e], offsets[e + 1]):
            for n in range(16):
                expect = sum(float(host["x"][t, k]) * w[e * 16 + n, k] for k in range(512))
                assert ref.ref[t, n] == pytest.approx(expect, rel=1e-12, abs=1e-12)


def _tensor_core_model(x16: np.ndarray, w16: np.ndarray) -> np.ndarray:
    """fp32 accumulation in k steps of 16, each step's sum truncated toward zero to fp32 (a pessimistic
    model of the hardware's alignment and truncation)."""
    acc = np.zeros((x16.shape[0], w16.shape[0]), dtype=np.float64)
    for k0 in range(0, x16.shape[1], 16):
        step = acc + x16[:, k0:k0 + 16].astype(np.float64) @ w16[:, k0:k0 + 16].astype(np.float64).T
        f32 = step.astype(np.float32)
        toward_zero = np.where(np.abs(f32.astype(np.float64)) > np.abs(step),
                               np.nextafter(f32, np.float32(0)), f32)
        acc = toward_zero.astype(np.float64)
    return acc


@pytest.mark.parametrize("fmt,k", [("iq2_s", 1536), ("iq4_nl", 640), ("q2_0", 1024)])
def test_tolerance_covers_fp16_weights_and_truncating_fp32_sums_but_not_a_zero_output(fmt, k):
    case = small_case(fmt, 32, k, "5,0,17,9")
    host = FAMILY.make_inputs(case)
    exp = FAMILY.reference(case, host)[0]
    assert exp.tol.shape == exp.ref.shape and np.isfinite(exp.tol).all() and (exp.tol > 0).all()
    w16 = pf._dequantize_fp16(fmt, host["w"])
    offsets = host["offsets"]
    model = np.zeros_like(exp.ref)
    for e in range(len(offsets) - 1):
        t0, t1 = offsets[e], offsets[e + 1]
        model[t0:t1] = _tensor_core_model(host["x"][t0:t1], w16[e * 32:(e + 1) * 32])
    err = np.abs(model - exp.ref)
    assert err.max() > 0 and (err <= exp.tol).all()  # every element within its own bound
    assert np.abs(exp.ref).max() > 20 * exp.tol.max()  # an all-zero output fails the check


def test_tolerance_grows_with_k_as_derived():
    a = small_case("iq4_nl", 128, 512, "20")
    b = small_case("iq4_nl", 128, 2048, "20")
    ta = FAMILY.reference(a, FAMILY.make_inputs(a))[0].tol
    tb = FAMILY.reference(b, FAMILY.make_inputs(b))[0].tol
    assert tb.max() > 2 * ta.max()


# --- the new kernel's decoders, modelled bit for bit ----------------------------------------------------------
M32 = 0xFFFFFFFF


def prmt(a: int, b: int, sel: int) -> int:
    """prmt.b32 / __byte_perm with selector nibbles < 8 (nvcc masks __byte_perm's with 0x7777)."""
    src = (a & M32) | ((b & M32) << 32)
    return sum(((src >> (8 * ((sel >> (4 * i)) & 7))) & 0xFF) << (8 * i) for i in range(4))


def funnel_r(lo: int, hi: int, s: int) -> int:
    return (((hi << 32) | lo) >> s) & M32


def f16_bits(v) -> int:
    return int(np.asarray(v, dtype=np.float32).astype(np.float16).view(np.uint16))


def half2(a, b) -> int:
    return f16_bits(a) | (f16_bits(b) << 16)


def bytes4_at(row, o_const: int, k: int) -> int:
    if o_const % 4 == 0:
        return row[o_const // 4 + k]
    return funnel_r(row[o_const // 4 + k], row[o_const // 4 + k + 1], 8 * (o_const % 4))


def byte_at(row, o_const: int, k: int) -> int:
    o = o_const + k
    return (row[o >> 2] >> (8 * (o & 3))) & 0xFF


def iq2s_selectors() -> list[tuple[int, int]]:
    from gguf import quants

    quants.IQ2_S.init_grid()
    grid = np.asarray(quants.IQ2_S.grid).reshape(1024, 8).astype(int)
    codes = (grid > 8).astype(int) + (grid > 25).astype(int)
    out = []
    for c in codes:
        sel = [(2 * c[2 * p]) | ((2 * c[2 * p] + 1) << 4) | ((2 * c[2 * p + 1]) << 8) | ((2 * c[2 * p + 1] + 1) << 12)
               for p in range(4)]
        out.append((sel[0] | sel[1] << 16, sel[2] | sel[3] << 16))
    return out


def decode_iq2s(row: list[int], boff: int, ib32: int, table) -> list[int]:
    """pfgemm_new.cu decode_iq2s<BOFF>: 32 fp16 bit patterns."""
    d_bits = row[0] >> 16 if boff else row[0] & 0xFFFF
    d = np.float32(np.uint16(d_bits).view(np.float16))
    qs4, signs4 = bytes4_at(row, boff + 2, ib32), bytes4_at(row, boff + 34, ib32)
    qh, sc = byte_at(row, boff + 66, ib32), byte_at(row, boff + 74, ib32)
    out = []
    for half in range(2):
        nib = sc >> 4 if half else sc & 15
        dl = d * (np.float32(0.5) + np.float32(nib)) * np.float32(0.25)
        lut_lo, lut_hi = half2(dl * np.float32(8), dl * np.float32(25)), half2(dl * np.float32(43), 0.0)
        for l in (2 * half, 2 * half + 1):
            sel = table[((qs4 >> (8 * l)) & 0xFF) | (((qh >> (2 * l)) & 3) << 8)]
            s = (signs4 >> (8 * l)) & 0xFF
            for p in range(4):
                selp = (sel[0] if p < 2 else sel[1]) >> (16 * (p & 1))
                flip = (s * ((1 << (15 - 2 * p)) | (1 << (30 - 2 * p)))) & 0x80008000
                w = prmt(lut_lo, lut_hi, selp) ^ flip
                out += [w & 0xFFFF, w >> 16]
    return out


def iq4nl_lookup(q: int, t: list[int]) -> tuple[int, int]:
    pick_high = 0x32103210 | ((q & 0x88888888) >> 1)
    both = []
    for h in range(2):
        lo, hi = prmt(t[0], t[1], q >> (16 * h)), prmt(t[2], t[3], q >> (16 * h))
        both.append(prmt(lo, hi, pick_high >> (16 * h)))
    return prmt(both[0], both[1], 0x6420), prmt(both[0], both[1], 0x7531)


def iq4nl_pair(b: int, k: int, d: np.float32) -> list[int]:
    vals = [np.uint32(prmt(b, 0x4B000000, 0x7650 + k + i)).view(np.float32) - np.float32(8388736.0)
            for i in (0, 1)]
    return [f16_bits(v * d) for v in vals]


def decode_iq4nl(row: list[int], sub: int, in_window: int, t: list[int]) -> list[int]:
    """pfgemm_new.cu decode_iq4nl<SUB>: 32 fp16 bit patterns."""
    blk = row[9 * in_window:]
    d_bits = blk[4] >> 16 if sub else blk[0] & 0xFFFF
    d = np.float32(np.uint16(d_bits).view(np.float16))
    lo, hi = [], []
    for w in range(4):
        kv = iq4nl_lookup(bytes4_at(blk, 18 * sub + 2, w), t)
        lo += iq4nl_pair(kv[0], 0, d) + iq4nl_pair(kv[0], 2, d)
        hi += iq4nl_pair(kv[1], 0, d) + iq4nl_pair(kv[1], 2, d)
    return lo + hi


def words_of(row_bytes: np.ndarray) -> list[int]:
    return [int(v) for v in np.ascontiguousarray(row_bytes).view("<u4")]


def test_new_iq2s_decoder_gives_the_exact_values_rounded_once_to_fp16():
    f = get_format("iq2_s")
    rng = np.random.default_rng(11)
    blocks = f.random_blocks(rng, 4)
    blocks[1, :2] = 0  # a zero scale: every weight is +-0 (the sign still comes from the sign bits)
    blocks[2, :2] = np.array([1], dtype=np.uint16).view(np.uint8)  # smallest subnormal d
    row = blocks.reshape(-1)  # one 1024-value row: windows 0..3 (both byte offsets)
    expect = f.dequantize(row[None, :])[0].astype(np.float16).view(np.uint16)
    table = iq2s_selectors()
    for window in range(4):
        first = (window * 82) >> 2
        raw = words_of(row[4 * first:4 * first + 84])
        for ib32 in range(8):
            got = decode_iq2s(raw, 2 if window & 1 else 0, ib32, table)
            want = expect[256 * window + 32 * ib32:256 * window + 32 * ib32 + 32]
            assert got == [int(v) for v in want], (window, ib32)


def test_new_iq4nl_decoder_gives_the_exact_values_rounded_once_to_fp16():
    from strata_bench.kernels.tables import table_arrays

    f = get_format("iq4_nl")
    rng = np.random.default_rng(12)
    blocks = f.random_blocks(rng, 8)
    blocks[3, :2] = 0
    blocks[5, :2] = np.array([0x8001], dtype=np.uint16).view(np.uint8)  # negative subnormal d
    row = blocks.reshape(-1)  # 256 values: two 128-value windows
    expect = f.dequantize(row[None, :])[0].astype(np.float16).view(np.uint16)
    t = [int(v) ^ 0x80808080 for v in table_arrays()["kvalues_iq4nl_u32"][1]]
    for window in range(2):
        raw = words_of(row[72 * window:72 * window + 72])
        for in_window in range(2):
            for sub in range(2):
                j = 4 * window + 2 * in_window + sub
                assert decode_iq4nl(raw, sub, in_window, t) == [int(v) for v in expect[32 * j:32 * j + 32]]


def test_raw_window_copies_cover_every_word_of_every_row_once():
    # RawWindow<IQ2_S>: thread t, q = t % 8 copies words q, q + 8 and (q < 5) q + 16 of rows t/8 + 32 p.
    seen = {}
    for t in range(256):
        q = t & 7
        for p in range(4):
            for j in range(3):
                if j < 2 or q < 5:
                    key = ((t >> 3) + 32 * p, q + 8 * j)
                    seen[key] = seen.get(key, 0) + 1
    assert seen == {(r, w): 1 for r in range(128) for w in range(21)}
    # RawWindow<IQ4_NL>: 8-byte words 0..7 of rows t/8 + 32 p, word 8 of row t for t < 128.
    seen = {}
    for t in range(256):
        for p in range(4):
            key = ((t >> 3) + 32 * p, t & 7)
            seen[key] = seen.get(key, 0) + 1
        if t < 128:
            seen[(t, 8)] = seen.get((t, 8), 0) + 1
    assert seen == {(r, w): 1 for r in range(128) for w in range(9)}


def locate_tile(offsets: np.ndarray, tile_rows: int, tile: int):
    """pf_common.cuh locate_tile: tiles numbered expert by expert."""
    first = 0
    for e in range(len(offsets) - 1):
        count = int(offsets[e + 1] - offsets[e])
        tiles = -(-count // tile_rows)
        if first <= tile < first + tiles:
            return e, int(offsets[e]) + (tile - first) * tile_rows, int(offsets[e + 1])
        first += tiles
    return None


@pytest.mark.parametrize("tile_rows", [32, 64])
def test_token_tiles_cover_every_group_row_once(tile_rows):
    for spec in (pf.GROUPS_A, pf.GROUPS_B, "0,0,0,1", "64x3"):
        sizes = pf.group_sizes_of(spec)
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        tiles = pf.token_tiles(sizes, tile_rows)
        rows = []
        for tile in range(tiles):
            e, r0, end = locate_tile(offsets, tile_rows, tile)
            rows += list(range(r0, min(r0 + tile_rows, end)))
        assert rows == list(range(int(sizes.sum())))
        assert locate_tile(offsets, tile_rows, tiles) is None  # an extra block finds nothing and leaves


# --- on the GPU ----------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_environment_switch_changes_what_auto_launches(monkeypatch):
    from strata_bench.kernels.build import load_kernels
    from strata_bench.gpu.launch import run_variant

    case = small_case("iq4_nl", 128, 256, "17,40")
    kernels = load_kernels(FAMILY, 0)
    dev = FAMILY.to_device(case, FAMILY.make_inputs(case))
    for switch, kernel in (("0", "old"), ("1", "new")):
        monkeypatch.setenv("STRATA_PF_WMMA2", switch)
        run_variant(FAMILY, case, "auto", kernels, dev)
        assert FAMILY.ran[(case.name, "auto")] == pf.kernel_expression(kernel, "iq4_nl")
