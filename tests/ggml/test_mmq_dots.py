"""Family mmq's other formats (ggml/mmq_dots.py, mmq_family.reference_and_bound) on the CPU, with the pinned
tree: each format's plan (its instance, tile config, activation layout, launch), the dot the tree dispatches
it to and the lines whose rounding the model emulates, the split of each format's weights into what the
loaders store, exact numbers of the model on hand-made blocks, and an fp32 emulation of ggml's arithmetic
that stays within every bound while a weight scale or min one fp16 ulp off falls outside."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from strata_bench.formats import get_format
from strata_bench.ggml import mmq, mmq_dots, mmq_family
from strata_bench.ggml.mmq_family import F64_REL, mmq_bound, reference_and_bound
from strata_bench.ggml.tree import locate
from strata_bench.numerics.bounds import gamma

H100_OPTIN, H100_SMS = 232448, 132
NEW = ("q4_1", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq1_s", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs",
       "iq3_s")
F32 = np.float32


@pytest.fixture(scope="module")
def tree(real_tree):
    return locate(real_tree)


# format: ggml_type, quantize_mmq_q8_1's layout, (the SRAM layout, shared bytes at J 16 and at J 128), the dot
Q8_0, Q8_1, Q3_K = ("Q8_0", 42048, 57856), ("Q8_1", 42048, 57856), ("Q3_K", 46144, 61952)
DOT_0, DOT_1, DOT_16 = "vec_dot_q8_0_q8_1_mma", "vec_dot_q8_1_q8_1_mma", "vec_dot_q8_0_16_q8_1_mma"
PLANS = {"q4_1": (3, 1, Q8_1, DOT_1), "q5_1": (7, 1, Q8_1, DOT_1), "q4_k": (12, 1, Q8_1, DOT_1),
         "q5_k": (13, 1, Q8_1, DOT_1), "iq1_s": (19, 1, Q8_0, DOT_1), "q3_k": (11, 0, Q3_K, DOT_16),
         "iq2_xs": (17, 0, Q3_K, DOT_16), "iq2_s": (22, 0, Q3_K, DOT_16), "iq2_xxs": (16, 0, Q8_0, DOT_0),
         "iq3_xxs": (18, 0, Q8_0, DOT_0), "iq3_s": (21, 0, Q8_0, DOT_0),
         "q2_k": (10, 2, ("Q2_K", 54336, 70144), "vec_dot_q2_K_q8_1_mma"),
         "q6_k": (14, 0, ("Q6_K", 42048, 57856), "vec_dot_q6_K_q8_1_mma")}


@pytest.mark.parametrize("fmt", NEW)
def test_each_format_plans_its_own_instance_on_sm_90(tree, fmt):
    type_id, layout, (sram, shared16, shared128), dot = PLANS[fmt]
    table = mmq.config_table(tree)
    assert tree.path(mmq.instance_source(fmt)).is_file()
    assert sorted(j for (f, j, fb) in table if f == fmt and fb) == [8, 16, 32, 64, 128]
    assert len([j for (f, j, fb) in table if f == fmt and not fb]) == 11
    qk = get_format(fmt).block_size
    small = mmq.choose(table, fmt, 1024, 16, H100_OPTIN)  # one block an SM, and the fixup
    assert (small.cols, small.fallback, small.sram_layout, small.shared_bytes()) == (16, False, sram, shared16)
    assert mmq.stream_k_grid(small, mmq.dense_args(1024, 2048, 16, qk), H100_SMS) == mmq.Grid(8, 132, True)
    big = mmq.choose(table, fmt, 4096, 512, H100_OPTIN)  # a block a tile, no fixup
    assert (big.cols, big.rows, big.nthreads, big.k_vram, big.stream_k) == (128, 128, 256, 256, True)
    (main,) = mmq.plan(tree, big, mmq.dense_args(4096, 2048, 512, qk), H100_SMS, "W", "XQ", "Y", "TMP")
    assert (main.kernel, main.grid, main.block, main.shared) == (f"mul_mat_q<(ggml_type){type_id}, 128, false>",
                                                                 (128, 1, 1), (32, 8, 1), shared128)
    values = {p.label: p.value for p in main.params}
    assert (values["stride_row_x"], values["blocks_per_ne00"][2]) == (2048 // qk, 2048 // qk)
    fallback = mmq.choose(table, fmt, 1000, 100, H100_OPTIN)
    assert mmq.kernel_names(tree, fallback)[1] == f"mul_mat_q_stream_k_fixup<(ggml_type){type_id}, 128, true>"
    assert mmq.quantize_plan(fmt, 2048, 16, "X", "XQ").kernel == f"quantize_mmq_q8_1<(mmq_q8_1_ds_layout){layout}, false>"
    assert mmq_dots.tree_dots(tree)[fmt] == mmq_dots.DOTS[fmt].name == dot


def test_the_tree_has_the_lines_the_model_emulates(tree, fake_tree):
    assert mmq_dots.lacking(tree, mmq_family.FORMATS) is None
    faked = locate(fake_tree)
    assert mmq_dots.lacking(faked, mmq_family.FORMATS) is None
    loaders = fake_tree / mmq_dots.LOADERS
    loaders.write_text(loaders.read_text().replace("make_half2(d1q, d1q*delta)", "make_half2(d1q, d1q)"))
    assert mmq_dots.lacking(faked, mmq_family.FORMATS) == (
        "src/ggml-cuda/mmq-load-tiles.cuh has no `x_ds[i*sram_stride + kqsx] = make_half2(d1q, d1q*delta);`, which "
        "family mmq's error model bounds (an unsupported ggml version?)")
    assert mmq_dots.lacking(faked, mmq_family.FORMATS, lines=False) is None
    header = fake_tree / mmq.MMQ_CUH
    header.write_text(header.read_text().replace("ggml_cuda_mmq_vec_dot_q6_K_q8_1_mma", "ggml_cuda_mmq_vec_dot_x"))
    assert mmq_dots.lacking(faked, ("q6_k",), lines=False) == (
        "src/ggml-cuda/mmq.cuh: q6_k's mul_mat_q dot is vec_dot_x, not vec_dot_q6_K_q8_1_mma, which family mmq's "
        "error model bounds (an unsupported ggml version?)")


def _block(fmt: str, fields: dict[int, bytes]) -> np.ndarray:
    raw = np.zeros((1, get_format(fmt).type_size), np.uint8)
    for offset, data in fields.items():
        raw[0, offset:offset + len(data)] = np.frombuffer(data, np.uint8)
    return raw


def _f16(value: float) -> bytes:
    return np.float16(value).tobytes()


def test_the_q4_k_loader_rounds_d_sc_to_fp16_and_the_model_adds_exactly_that():
    # d = 1 + 2^-10, dmin 0.5; sub-block 0: sc 3, m 5; value 0's code 7, all others 0.
    raw = _block("q4_k", {0: _f16(1.0009765625), 2: _f16(0.5), 4: bytes([3]), 8: bytes([5]), 16: bytes([7])})
    parts = mmq_dots.split("q4_k", raw, 1, 256)
    assert parts.a[0, 0] == 1.0009765625 * 21 and parts.a_dev[0, 0] == 3.00390625 * 7  # d sc 3.0029296875: a tie
    assert parts.b[0, 0] == parts.b_dev[0, 0] == -2.5 and parts.group == 32 and (parts.b[0, 1:] == 0).all()
    x = np.zeros((1, 256))
    x[0, 0] = 1.0
    ref, bound = reference_and_bound("q4_k", raw, x, 1, 256)
    magnitude = 3.00390625 * 7 + 2.5
    assert ref[0, 0] == 1.0009765625 * 21 - 2.5
    known = 2.0 ** -10 * 7  # fp16(d sc) - d sc, times the code
    assert bound[0, 0] == known + 1.01 * (gamma(2 + 3 * 8) + 2.0 ** -20) * magnitude + 256 * F64_REL * (
        ref[0, 0] + magnitude)


def test_the_q2_k_loader_rounds_both_halves_and_the_sums_are_of_16_values():
    # d 1 + 2^-10, dmin 1 + 2^-10; sub-block 1 (values 16-31): sc 3, m 5; value 16's code 2 (qs byte 16, its
    # low two bits: gguf-py's order).
    raw = _block("q2_k", {1: bytes([3 | 5 << 4]), 32: bytes([2]), 80: _f16(1.0009765625), 82: _f16(1.0009765625)})
    parts = mmq_dots.split("q2_k", raw, 1, 256)
    assert parts.group == 16 and parts.b.shape == (1, 16)
    assert parts.a[0, 16] == 1.0009765625 * 6 and parts.a_dev[0, 16] == 3.00390625 * 2  # d sc 3.0029296875: a tie, to even
    assert parts.b[0, 1] == -1.0009765625 * 5 and parts.b_dev[0, 1] == -5.00390625  # 5.0048828125 rounds down
    assert (parts.b[0, 2:] == 0).all() and (parts.a[0, 32:] == 0).all()
    x = np.arange(256, dtype=np.float64)[None, :] / 64
    sums, read = mmq_dots.activation_sums(x, 16)
    assert (sums == read).all() and sums[0, 1] == sum(range(16, 32)) / 64


def test_iq1_s_keeps_codes_plus_one_and_the_rounded_offset():
    qh = (1 << 12) | (1 << 15)  # sub-block 0: s 1 (dl = 3 d), the delta's sign bit set
    raw = _block("iq1_s", {0: _f16(1.0009765625), 34: np.uint16(qh).tobytes()})
    parts = mmq_dots.split("iq1_s", raw, 1, 256)
    dl = 1.0009765625 * 3
    np.testing.assert_array_equal(parts.exact, get_format("iq1_s").dequantize(raw).astype(np.float64))
    assert parts.b[0, 0] == dl * -1.125 and parts.b_dev[0, 0] == float(np.float16(dl * -1.125))
    codes = parts.a[0, :32] / dl
    assert set(np.unique(codes)) <= {0.0, 1.0, 2.0} and (parts.a_dev[0, :32] == codes * 3.00390625).all()


@pytest.mark.parametrize("fmt", NEW)
def test_the_split_is_the_formats_values(fmt):
    family = mmq_family.into({})
    host = family.make_inputs(family.case(fmt, 16, 512, 8, "seed:5"))
    parts = mmq_dots.split(fmt, host["w"], 16, 512)
    w32 = get_format(fmt).dequantize(host["w"]).astype(np.float64).reshape(16, 512)
    assert np.abs(parts.exact - w32).max() <= 2.0 ** -24 * np.abs(w32).max()  # gguf-py's float32 at most
    moved = parts.a_dev != parts.a
    assert moved.any() == (fmt in ("q2_k", "q4_k", "q5_k", "iq1_s"))  # the scales the loaders round to fp16
    assert np.abs(parts.a_dev - parts.a).max() <= 2.0 ** -11 * np.abs(parts.a).max()


def _emulated(fmt: str, raw: np.ndarray, x: np.ndarray, rows: int, k: int) -> np.ndarray:
    """ggml's sum in fp32, chunk by chunk in k order: each 32 values' exact dot with the loader's scales
    rounded to fp32, then its min terms (offset times the fp16 sum, rounded), each added in fp32."""
    parts = mmq_dots.split(fmt, raw, rows, k)
    _, sums = mmq_dots.activation_sums(x, parts.group)
    per = 32 // parts.group
    acc = np.zeros((x.shape[0], rows), F32)
    for c in range(k // 32):
        acc = (acc + (x[:, c * 32:(c + 1) * 32] @ parts.a_dev[:, c * 32:(c + 1) * 32].T).astype(F32)).astype(F32)
        for g in range(c * per, (c + 1) * per):
            acc = (acc + np.outer(sums[:, g], parts.b_dev[:, g]).astype(F32)).astype(F32)
    return acc.astype(np.float64)


def _one_ulp_up(raw: np.ndarray, fmt: str, offset: int) -> np.ndarray:
    spec = get_format(fmt)
    blocks = raw.copy().reshape(-1, spec.type_size)
    half = blocks[:, offset:offset + 2].copy().view(np.float16)
    blocks[:, offset:offset + 2] = np.nextafter(half, np.float16(np.inf)).view(np.uint8)
    return blocks.reshape(raw.shape)


# Each format's fp16 d, and the min or offset scale where it has one (q4_1/q5_1 m, K-quants' dmin), with the
# share of outputs that must fall outside the bound when it is one ulp up: over half for d; for the min, whose
# term multiplies each chunk's activation sum (random signs, so the shift mostly cancels), over 5%.
SCALES = {fmt: ((mmq_dots.D_OFFSET.get(fmt, 0), 0.5),) for fmt in NEW}
SCALES.update({f: ((0, 0.5), (2, 0.05)) for f in ("q4_1", "q5_1", "q4_k", "q5_k")})
SCALES["q2_k"] = ((80, 0.5), (82, 0.05))


@pytest.mark.parametrize("fmt", NEW)
def test_the_bound_holds_ggmls_arithmetic_and_not_a_scale_one_ulp_off(fmt):
    family = mmq_family.into({})
    case = family.case(fmt, 48, 1024, 24, "seed:3")
    host = family.make_inputs(case)
    (exp,) = family.reference(case, host)
    err = np.abs(_emulated(fmt, host["w"], host["x"].astype(np.float64), 48, 1024) - exp.ref)
    assert (err <= exp.tol).all() and err.max() > 0
    for offset, share in SCALES[fmt]:
        off = _emulated(fmt, _one_ulp_up(host["w"], fmt, offset), host["x"].astype(np.float64), 48, 1024)
        assert (np.abs(off - exp.ref) > exp.tol).mean() > share, offset


def test_q2_k_activations_share_a_scale_over_64_values():
    x = mmq_family.prequantized_activations(5, 3, 512, mmq_family.scale_values("q2_k"))
    chunks = np.abs(x.astype(np.float64)).reshape(3, 8, 64).max(axis=2) / 127
    assert (np.log2(chunks) == np.round(np.log2(chunks))).all()  # amax over 64 values is 127 2^e
    d = np.repeat(chunks, 64, axis=1)
    np.testing.assert_array_equal(np.round(x / d), x / d)
    halves = np.abs(x.astype(np.float64)).reshape(3, 16, 32).max(axis=2)
    assert (halves == np.repeat(chunks * 127, 2, axis=1)).all()  # each 32 values keep a +-127 too
    assert mmq_family.scale_values("q4_k") == 32


def test_mmq_bound_counts_the_min_terms():
    assert mmq_bound(np.ones(1), 1024, 2, 2)[0] == 1.01 * (gamma(2 + 3 * 32) + 2.0 ** -20)
    assert mmq_bound(np.ones(1), 1024)[0] == 1.01 * (gamma(2 + 2 * 32) + 2.0 ** -20)


LOWERED = json.loads((Path(__file__).parent / "nvcc_lowered_mmq.json").read_text())


@pytest.mark.parametrize("fmt", NEW)
def test_every_launchable_kernel_was_found_in_an_nvcc_build(tree, fmt):
    """nvcc 13.0's cubin of each format's template instance (sm_90, a 2-core CPU host), searched by the
    demangled names spelling.complete gives (the defaulted ggml_prec included) with find_kernel, as the run
    does: tests/ggml/nvcc_lowered_mmq.json keeps the symbol each name the plan can launch was found as."""
    type_id = tree.type_ids[fmt]
    names = [n for (f, _, _), c in mmq.config_table(tree).items() if f == fmt for n in mmq.kernel_names(tree, c)]
    assert sorted(names) == sorted(LOWERED[fmt]) and len(names) == 32
    for name, symbol in LOWERED[fmt].items():
        _, j, fallback = (a.strip() for a in name[name.index("<") + 1:-1].split(","))
        kernel = "9mul_mat_q" if name.startswith("mul_mat_q<") else "24mul_mat_q_stream_k_fixup"
        assert symbol.startswith(f"_Z{kernel}IL9ggml_type{type_id}ELi{j}ELb{int(fallback == 'true')}EL9ggml_prec30E")


@pytest.mark.parametrize("fmt", ["q2_k", "q4_k", "q5_k", "iq1_s"])
def test_the_rounding_bound_alone_would_not_hold_the_loaders_fp16_scales(fmt):
    """Without the known deviation of the scales the loader rounds to fp16, the fp32 rounding bound alone is
    exceeded by ggml's arithmetic: the model's known term is needed, not decoration."""
    family = mmq_family.into({})
    case = family.case(fmt, 48, 1024, 24, "seed:3")
    host = family.make_inputs(case)
    (exp,) = family.reference(case, host)
    x = host["x"].astype(np.float64)
    err = np.abs(_emulated(fmt, host["w"], x, 48, 1024) - exp.ref)
    w = mmq_dots.split(fmt, host["w"], 48, 1024).exact
    dot = mmq_dots.DOTS[fmt]
    assert (err > mmq_bound(np.abs(x) @ np.abs(w).T, 1024, dot.term_roundings, dot.adds)).mean() > 0.5


def test_each_dots_rounding_count():
    counts = {fmt: (d.term_roundings, d.adds, d.group) for fmt, d in mmq_dots.DOTS.items()}
    assert counts == {**{f: (2, 1, 0) for f in ("q4_0", "q5_0", "q8_0", "iq2_xxs", "iq3_xxs", "iq3_s", "iq4_nl",
                                                "iq4_xs")},
                      **{f: (3, 1, 0) for f in ("q3_k", "iq2_xs", "iq2_s")},
                      **{f: (2, 2, 32) for f in ("q4_1", "q5_1", "q4_k", "q5_k", "iq1_s")},
                      "q2_k": (5, 3, 16), "q6_k": (6, 1, 0)}
    assert sorted(counts) == sorted(mmq_family.FORMATS)
