"""What every format shares (formats/_common.py and the registry): geometry against gguf, float32 oracle
against the float64 values, random and edge-case generators, describe_block."""
from __future__ import annotations

import gguf
import numpy as np
import pytest
from gguf.constants import GGML_QUANT_SIZES

from strata_bench.errors import InputError
from strata_bench.formats import all_formats, get_format

REQUIRED = ("iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_nl", "iq4_xs",
            "q8_0", "q4_0", "q4_1", "q5_0", "q3_k", "q4_k", "q6_k", "q2_0")
ADDED = ("q5_1", "q2_k", "q5_k", "tq1_0", "tq2_0", "mxfp4", "nvfp4", "q2_0_ggml")
MINIFLOAT_SCALED = ("mxfp4", "nvfp4")  # E8M0 / UE4M3 scales: their generators are tested in test_fp4.py
FP16_SCALED = tuple(n for n in REQUIRED + ADDED if n not in MINIFLOAT_SCALED)
EVERY = REQUIRED + ADDED


def _gguf_dequantizable_quant_types() -> set:
    """The block-quantized types gguf.quants.dequantize handles in the installed gguf-py."""
    found = set()
    for qtype in gguf.GGMLQuantizationType:
        block_size, type_size = GGML_QUANT_SIZES[qtype]
        if block_size == 1:
            continue  # F32, F16, BF16, integers: not quant formats
        try:
            gguf.quants.dequantize(np.zeros((1, type_size), dtype=np.uint8), qtype)
        except NotImplementedError:
            continue
        found.add(qtype)
    return found


# --- geometry and registry -----------------------------------------------------------------------
def test_every_required_format_is_registered_with_ggml_geometry():
    formats = all_formats()
    assert set(REQUIRED) <= set(formats)
    for name in REQUIRED:
        fmt = formats[name]
        if fmt.qtype is not None:
            assert GGML_QUANT_SIZES[fmt.qtype] == (fmt.block_size, fmt.type_size), name
            assert fmt.qtype.name.lower() == name
    assert (formats["q2_0"].block_size, formats["q2_0"].type_size, formats["q2_0"].qtype) == (64, 18, None)


def test_every_quant_type_gguf_py_dequantizes_is_registered_once():
    types = _gguf_dequantizable_quant_types()
    assert len(types) == 23  # gguf 0.19.0; a new gguf-py type shows up here first
    registered = [f.qtype for f in all_formats().values() if f.qtype is not None]
    assert sorted(registered) == sorted(types)
    for fmt in all_formats().values():
        if fmt.qtype is not None:
            assert GGML_QUANT_SIZES[fmt.qtype] == (fmt.block_size, fmt.type_size), fmt.name
            assert fmt.qtype.name.lower() == fmt.name
    assert set(all_formats()) == set(EVERY)


def test_unknown_format_and_bad_row_length_are_input_errors():
    assert get_format("IQ2_XXS").name == "iq2_xxs"
    with pytest.raises(InputError, match="iq9_z"):
        get_format("iq9_z")
    with pytest.raises(InputError, match="500"):
        get_format("iq2_xxs").bytes_per_row(500)
    assert get_format("q2_0").bytes_per_row(2560) == 40 * 18


# --- values --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", EVERY)
def test_float32_oracle_is_the_float64_values_rounded(name, samples):
    fmt = get_format(name)
    blocks = samples(fmt)
    v32, v64 = fmt.dequantize(blocks), fmt.dequantize_f64(blocks)
    assert v32.dtype == np.float32 and v32.shape == (len(blocks), fmt.block_size)
    # gguf rounds the scale products in float32, a few ulps at most.
    np.testing.assert_allclose(v32, v64, rtol=4e-7, atol=0)
    if fmt.qtype is not None:
        np.testing.assert_array_equal(v32, gguf.quants.dequantize(blocks, fmt.qtype))


@pytest.mark.parametrize("name", EVERY)
def test_float32_oracle_is_within_its_roundings_of_the_float64_terms(name, samples):
    """gguf-py rounds each product and sum in float32: at most a few half-ulps of the largest term."""
    fmt = get_format(name)
    blocks = samples(fmt, seed=8)
    magnitude = sum(np.abs(f.read(blocks)[:, None] * fmt.unit_values(blocks, f)) for f in fmt.scales)
    error = np.abs(fmt.dequantize(blocks).astype(np.float64) - fmt.dequantize_f64(blocks))
    assert (error <= magnitude * 2.0 ** -22).all()


def test_rows_keep_their_shape():
    fmt = get_format("iq3_s")
    raw = fmt.random_blocks(np.random.default_rng(0), 6).reshape(3, 2 * fmt.type_size)
    assert fmt.dequantize(raw).shape == (3, 512)
    assert fmt.dequantize_f64(raw).shape == (3, 512)


# --- generators ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", FP16_SCALED)
def test_random_blocks_are_seeded_with_small_finite_scales_in_place(name):
    fmt = get_format(name)
    first = fmt.random_blocks(np.random.default_rng(11), 2000)
    assert first.shape == (2000, fmt.type_size) and first.dtype == np.uint8
    np.testing.assert_array_equal(first, fmt.random_blocks(np.random.default_rng(11), 2000))
    assert not np.array_equal(first, fmt.random_blocks(np.random.default_rng(12), 2000))
    # A scale read from the wrong bytes would be uniform fp16 bits: huge, or inf/nan.
    for scale in fmt.scale_values(first).values():
        assert np.isfinite(scale).all()
        assert 0.7e-3 < scale.std() < 1.3e-3
    values = fmt.dequantize(first)
    assert np.isfinite(values).all() and float(np.abs(values).max()) < 100.0  # 6 sigma x 4096 (Q6_K) is 25


@pytest.mark.parametrize("name", FP16_SCALED)
def test_edge_blocks_cover_the_extremes(name):
    fmt = get_format(name)
    cases = dict(fmt.edge_cases(np.random.default_rng(5)))
    assert len(cases) == len(fmt.edge_blocks(np.random.default_rng(5)))
    peak = {label: np.abs(fmt.dequantize_f64(block)).max() for label, block in cases.items()}
    assert peak["zero scale"] == 0
    assert all(np.isfinite(fmt.dequantize(block)).all() for block in cases.values())
    scales = {label: fmt.scale_values(block) for label, block in cases.items()}
    assert all(float(s[0]) == 65504 for s in scales["largest finite scale"].values())
    assert all(0 < abs(float(s[0])) < 6.2e-5 for s in scales["smallest subnormal scale"].values())
    assert 2.9e4 < peak["outlier ~30000"] < 3.1e4
    # The loudest code pattern is at least as loud as the other extremes with the same scale.
    assert peak["codes largest |value|"] >= max(peak["codes all 0x00"], peak["codes all 0xFF"]) > 0


def test_describe_block_decodes_scales_and_values():
    fmt = get_format("q4_k")
    block = dict(fmt.edge_cases(np.random.default_rng(0)))["largest finite scale"]
    text = fmt.describe_block(block)
    assert "d=65504 (0x7bff)" in text and "dmin=65504 (0x7bff)" in text and "first values" in text
    assert "d=" in get_format("iq1_m").describe_block(fmt.random_blocks(np.random.default_rng(0), 1)[0][:56])


@pytest.mark.parametrize("name", EVERY)
def test_describe_block_names_every_scale_field_of_every_format(name):
    fmt = get_format(name)
    block = fmt.random_blocks(np.random.default_rng(2), 1)[0]
    text = fmt.describe_block(block)
    assert text.startswith(name + " ") and "first values [" in text
    for field in fmt.scales:
        bits = int(field.read_bits(block[None, :])[0])
        assert f"{field.name}={float(field.read(block[None, :])[0]):.6g} (0x{bits:0{field.hex_digits}x})" in text


# --- every format through `fixtures make` and `fixtures verify` ---------------------------------------
@pytest.mark.parametrize("name", ADDED)
def test_fixtures_make_and_verify_work_for_every_added_format(name, tmp_path):
    from click.testing import CliRunner

    from strata_bench.cli.main import cli
    from strata_bench.data.store import load_fixture
    from strata_bench.data.synthetic import synthetic_weights

    runner = CliRunner()
    made = runner.invoke(cli, ["fixtures", "make", "--format", name, "--shape", "8x256", "--seed", "1",
                               "--root", str(tmp_path)])
    assert made.exit_code == 0, made.output
    assert f"{name}-8x256-s1" in made.output
    edged = runner.invoke(cli, ["fixtures", "make", "--format", name, "--shape", "8x256", "--seed", "1", "--edge",
                                "--root", str(tmp_path)])
    assert edged.exit_code == 0, edged.output
    verified = runner.invoke(cli, ["fixtures", "verify", "--root", str(tmp_path)])
    assert verified.exit_code == 0, verified.output
    assert "ok: 2 fixture(s)" in verified.output
    fix = load_fixture(f"{name}-8x256-s1", tmp_path)
    np.testing.assert_array_equal(fix.raw, synthetic_weights(name, 8, 256, 1))
