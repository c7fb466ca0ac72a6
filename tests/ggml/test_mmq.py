"""Family mmq and ggml's mul_mat_q (ggml/mmq.py, mmq_family.py) on the CPU: the plan read from the pinned tree
for sm_90 (instance, J and I, fallback, stream-k grid and fixup), the argument packing, the family added to a
run's catalog only, the exactly quantizable activations, and the error model: an fp32 emulation of ggml's
arithmetic stays within the bound, a weight scale one fp16 ulp off does not. The NVRTC compile of one
instance is marked nvrtc and slow."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.cases.registry import FAMILIES
from strata_bench.ggml import mmq, mmq_family
from strata_bench.ggml.tree import locate

H100_OPTIN, H100_SMS = 232448, 132  # sharedMemPerBlockOptin and SMs of an H100 SXM (sm_90)


@pytest.fixture(scope="module")
def tree(real_tree):
    return locate(real_tree)


@pytest.mark.parametrize("rows,ncols,j,fallback,grid", [
    (1024, 16, 16, False, mmq.Grid(8, 132, True)),      # 8 tiles fill 6% of a wave: one block per SM, fixup
    (1000, 100, 128, True, mmq.Grid(8, 132, True)),     # rows % 128: the fallback table (J 8, 16, 32, 64, 128)
    (4096, 100, 112, False, mmq.Grid(32, 132, True)),   # J 112: the first J of one column tile
    (4096, 512, 128, False, mmq.Grid(128, 128, False)), # 128 tiles fill 97% of a wave: a block a tile, no fixup
    (1000, 512, 128, True, mmq.Grid(32, 132, True)),
])
def test_the_sm_90_plan_is_the_ampere_tables(tree, rows, ncols, j, fallback, grid):
    table = mmq.config_table(tree)
    cfg = mmq.choose(table, "q8_0", rows, ncols, H100_OPTIN)
    assert (cfg.cols, cfg.rows, cfg.nthreads, cfg.fallback, cfg.stream_k, cfg.k_vram) == (j, 128, 256, fallback, True, 256)
    assert mmq.stream_k_grid(cfg, mmq.dense_args(rows, 2048, ncols, 32), H100_SMS) == grid
    assert mmq.kernel_names(tree, cfg) == (f"mul_mat_q<(ggml_type)8, {j}, {str(fallback).lower()}>",
                                           f"mul_mat_q_stream_k_fixup<(ggml_type)8, {j}, {str(fallback).lower()}>")


def test_every_family_format_has_its_instance_and_both_tables(tree):
    table = mmq.config_table(tree)
    for fmt in mmq_family.FORMATS:
        assert tree.path(mmq.instance_source(fmt)).is_file()
        assert sorted(j for (f, j, fb) in table if f == fmt and fb) == [8, 16, 32, 64, 128]
        assert sorted(j for (f, j, fb) in table if f == fmt and not fb) == [8, 16, 24, 32, 40, 48, 64, 80, 96,
                                                                            112, 128]
    assert mmq.lacking(tree) is None
    assert mmq.choose(table, "q8_0", 4096, 512, 0x10000).shared_bytes() == 512 + 128 * 76 * 4 + 18432


def test_a_small_shared_memory_takes_a_smaller_tile(tree):
    table = mmq.config_table(tree)
    assert mmq.choose(table, "q8_0", 4096, 512, 50000).cols == 64  # J 80..128 need more than 50000 bytes
    with pytest.raises(Exception) as err:
        mmq.choose(table, "q8_0", 4096, 512, 1000)
    assert str(err.value) == ("--ggml: src/ggml-cuda/mmq-config-ampere.cuh has no mul_mat_q config for q8_0 that "
                              "fits 1000 bytes of shared memory")


def test_the_launch_arguments(tree):
    cfg = mmq.choose(mmq.config_table(tree), "q8_0", 1000, 100, H100_OPTIN)
    args = mmq.dense_args(1000, 2048, 100, 32)
    main, fixup = mmq.plan(tree, cfg, args, H100_SMS, "W", "XQ", "Y", "TMP")
    values = {p.label: p.value for p in main.params}
    assert [p.label for p in main.params] == [label for label, _ in mmq.MAIN_SIGNATURE]
    assert (main.grid, main.block, main.shared) == ((132, 1, 1), (32, 8, 1), 57856)
    assert (values["x"], values["y"], values["ids_dst"], values["dst"], values["tmp_fixup"]) == ("W", "XQ", 0, "Y", "TMP")
    assert values["blocks_per_ne00"][2] == 64 and values["ntx"][2] == 1 and values["nchannels_y"][2] == 1
    assert (values["nrows_x"], values["ncols_dst"], values["stride_row_x"], values["ncols_y"],
            values["stride_col_dst"]) == (1000, 100, 64, 100, 1000)
    assert values["stride_channel_y"] == 100 * 2048 * 36 // 128
    assert (fixup.grid, fixup.block, fixup.shared) == ((132, 4, 1), (32, 4, 1), 0)
    assert [p.value for p in fixup.params][2:4] == ["Y", "TMP"]
    assert mmq.fixup_floats(cfg, mmq.stream_k_grid(cfg, args, H100_SMS)) == 132 * 128 * 128
    (alone,) = mmq.plan(tree, mmq.choose(mmq.config_table(tree), "q8_0", 4096, 512, H100_OPTIN),
                        mmq.dense_args(4096, 2048, 512, 32), H100_SMS, "W", "XQ", "Y", "TMP")
    assert [p.value for p in alone.params][5] == 0  # no fixup: no buffer


@pytest.mark.parametrize("fmt,layout", [("q8_0", 0), ("iq4_xs", 0), ("q4_0", 1), ("q2_k", 2)])
def test_the_activation_quantization(fmt, layout):
    launch = mmq.quantize_plan(fmt, 2304, 100, "X", "XQ")
    assert launch.kernel == f"quantize_mmq_q8_1<(mmq_q8_1_ds_layout){layout}, false>"
    assert (launch.grid, launch.block) == ((100, 5, 1), (128, 1, 1))  # k padded to 2560: 5 x 512 values
    assert [p.value for p in launch.params] == ["X", 0, "XQ", 2304, 2304, 230400, 230400, 2560, 100, 1, 0]
    assert mmq.activation_bytes(2304, 100, 128) == (100 * 2560 // 128 + 128) * 144


def test_the_family_joins_a_runs_catalog_and_not_the_registry():
    catalog = {}
    family = mmq_family.into(catalog)
    assert list(catalog) == ["mmq"] and "mmq" not in FAMILIES
    names = [c.name for c in family.default_cases()]
    assert len(names) == 72 and names[:2] == ["mmq/q4_0/1024x2048/n16/seed:1", "mmq/q4_0/1000x2048/n100/seed:2"]
    assert names[4] == "mmq/q4_1/1024x2048/n16/seed:1" and names[-1] == "mmq/iq4_xs/1000x1024/n512/seed:4"


def test_the_activations_quantize_exactly():
    x = mmq_family.prequantized_activations(5, 3, 256).reshape(3, 8, 32).astype(np.float64)
    amax = np.abs(x).max(axis=2, keepdims=True)
    d = amax / 127
    assert np.all(np.log2(d) == np.round(np.log2(d))) and d.min() >= 2.0 ** -6 and d.max() <= 1
    np.testing.assert_array_equal(np.round(x / d), x / d)  # every value an integer multiple of its scale


def _emulated(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """ggml's arithmetic in fp32: each chunk's exact dot C * d_w (w = d_w * code), times d_x, rounded twice,
    summed chunk by chunk."""
    ncols, k = x.shape
    d = (np.abs(x).reshape(ncols, -1, 32).max(axis=2) / 127).astype(np.float32)
    q = x.reshape(ncols, -1, 32) / d[..., None].astype(np.float64)
    acc = np.zeros((ncols, w.shape[0]), dtype=np.float32)
    for c in range(k // 32):
        cw = (q[:, c] @ w[:, c * 32:(c + 1) * 32].T).astype(np.float32)  # C * d_w: exact in float64, one rounding
        acc = acc + (cw * d[:, c:c + 1])  # float32 product and sum: two more roundings
    return acc.astype(np.float64)


@pytest.mark.parametrize("fmt", ["q8_0", "iq4_xs"])
def test_the_bound_holds_ggmls_arithmetic_and_not_a_scale_one_ulp_off(fmt):
    family = mmq_family.into({})
    case = family.case(fmt, 48, 1024, 24, "seed:3")
    host = family.make_inputs(case)
    (exp,) = family.reference(case, host)
    from strata_bench.formats import get_format

    spec = get_format(fmt)
    w = spec.dequantize(host["w"]).astype(np.float64).reshape(48, 1024)
    err = np.abs(_emulated(w, host["x"]) - exp.ref)
    assert (err <= exp.tol).all() and err.max() > 0
    raw = host["w"].copy().reshape(48, -1, spec.type_size)
    d = raw[..., :2].copy().view(np.float16)
    raw[..., :2] = np.nextafter(d, np.float16(np.inf)).view(np.uint8)  # every block's d one fp16 ulp up
    w_off = spec.dequantize(raw.reshape(48, -1)).astype(np.float64).reshape(48, 1024)
    off = np.abs(_emulated(w_off, host["x"]) - exp.ref)
    assert (off > exp.tol).mean() > 0.5


@pytest.mark.nvrtc
@pytest.mark.slow
@pytest.mark.parametrize("fmt,type_id", [("q8_0", 8), ("q4_k", 12), ("iq2_xxs", 16)])
def test_an_instance_compiles_by_name_with_nvrtc(tree, monkeypatch, tmp_path, fmt, type_id):
    from tests.ggml.test_nvrtc_build import _nvrtc_or_skip
    from strata_bench.ggml import build
    from strata_bench.ggml.launch import checker
    from strata_bench.ggml.mmq_variants import signature

    _nvrtc_or_skip()
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(build.COMPILER_ENV, "nvrtc")
    cfg = mmq.choose(mmq.config_table(tree), fmt, 1000, 100, H100_OPTIN)
    exprs = list(mmq.kernel_names(tree, cfg))
    spec = build.source_build(tree, mmq.instance_source(fmt), "--ggml variant 'ggml'", checker(signature, "ggml"))
    compiled = spec.compile("unit", exprs, "90", use_cache=False)  # 14-30 s on 2 cores
    assert compiled.lowered[exprs[0]].startswith(f"_Z9mul_mat_qIL9ggml_type{type_id}ELi128ELb1EL9ggml_prec")
    assert compiled.lowered[exprs[1]].startswith(f"_Z24mul_mat_q_stream_k_fixupIL9ggml_type{type_id}ELi128ELb1E")
