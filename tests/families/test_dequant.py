"""dequant family and the i-quant decoders: the CUDA decode code compiled for the CPU (tests/iq_host) must
reproduce gguf-py bit for bit, and its decode contract (value = dw * ls * w) must hold exactly."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from strata_bench.families import load_builtin_families
from strata_bench import kit
from strata_bench.data.synthetic import synthetic_weights
from strata_bench.formats import get_format

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from iq_host import harness

FAMILY = load_builtin_families()["dequant"]


def _blocks(fmt: str, seed: int = 3) -> np.ndarray:
    """Edge blocks (zero, subnormal, 65504 and -65504 scales, extreme codes, an outlier) then random ones."""
    f = get_format(fmt)
    return synthetic_weights(fmt, 6, f.block_size * 16, seed, edge=True).reshape(-1, f.type_size)


# --- the decoders, run on the CPU -----------------------------------------------------------------------
@pytest.mark.parametrize("fmt", kit.KERNEL_FORMATS)
def test_host_dequant_is_bit_identical_to_gguf(fmt):
    blocks = _blocks(fmt)
    nchunks = blocks.shape[0] * get_format(fmt).block_size // 32
    out = harness.run_chunks(fmt, blocks, np.zeros((nchunks, 32), np.int8))
    oracle = get_format(fmt).dequantize(blocks).reshape(-1, 32)
    got = out["v"].view(np.uint32)
    differ = np.flatnonzero((got != oracle.view(np.uint32)).any(axis=1))
    assert differ.size == 0, f"{differ.size} chunks differ, first {differ[0]}: {out['v'][differ[0]][:8]} vs {oracle[differ[0]][:8]}"
    assert np.signbit(oracle).any() or fmt in ("q2_0",), "edge data should contain negative values"


@pytest.mark.parametrize("fmt", kit.KERNEL_FORMATS)
def test_decode_contract_holds_exactly(fmt):
    """dw * ls_half * w equals gguf's value exactly, and isum is the exact integer sum."""
    blocks = _blocks(fmt, seed=5)
    nchunks = blocks.shape[0] * get_format(fmt).block_size // 32
    q = np.random.default_rng(1).integers(-127, 128, size=(nchunks, 32), dtype=np.int8)
    out = harness.run_chunks(fmt, blocks, q)
    w = out["w"].view(np.int8).reshape(-1, 32).astype(np.int64)
    ls = np.concatenate([np.repeat(out["ls0"][:, None], 16, 1), np.repeat(out["ls1"][:, None], 16, 1)], 1)
    value = out["dw"].astype(np.float64)[:, None] * ls * w
    oracle = get_format(fmt).dequantize(blocks).reshape(-1, 32).astype(np.float64)
    assert np.array_equal(value, oracle)
    assert np.array_equal((ls * w * q).sum(axis=1), out["isum"])
    assert np.abs(out["isum"]).max() < 2 ** 24


@pytest.mark.parametrize("fmt", kit.KERNEL_FORMATS)
@pytest.mark.parametrize("codes", ["random", "max", "min"])
def test_isum_f_is_the_float_of_isum_bit_for_bit(fmt, codes):
    """chunk_isum_f (the dp4a chains started at the bits of 1.5 * 2^23) gives exactly (float)isum, at the
    edge blocks' extreme codes and scales and with every activation code at +-127, where the sums are
    largest."""
    blocks = _blocks(fmt, seed=7)
    nchunks = blocks.shape[0] * get_format(fmt).block_size // 32
    q = {"random": np.random.default_rng(2).integers(-127, 128, size=(nchunks, 32)),
         "max": np.full((nchunks, 32), 127), "min": np.full((nchunks, 32), -127)}[codes].astype(np.int8)
    out = harness.run_chunks(fmt, blocks, q)
    expected = out["isum"].astype(np.float32)
    assert np.array_equal(out["isum_f"].view(np.uint32), expected.view(np.uint32))
    assert np.abs(out["isum"]).max() > 0


def test_isum_bound_is_reached_only_below_2_24():
    # The widest product in the contract: iq4_xs with scale 0 (ls = -32), kvalue -127, q = -127.
    assert 32 * 32 * 127 * 127 < 2 ** 24


# --- the family ---------------------------------------------------------------------------------------------
@pytest.mark.nvrtc
def test_source_compiles_for_sm90_without_spills(cubin_cache):
    from strata_bench.kernels.build import compile_source, parse_resources

    comp = compile_source("dequant/dequant.cu", FAMILY.name_expressions("dequant/dequant.cu"), "sm_90")
    res = parse_resources(comp.log, comp.lowered)
    assert {r.kernel for r in res} == set(FAMILY.name_expressions("dequant/dequant.cu"))
    assert all(r.spill_stores == 0 and r.stack_bytes == 0 for r in res), res


def test_cases_cover_every_format_and_data_kind():
    cases = list(FAMILY.default_cases())
    assert {c.fmt for c in cases} == set(kit.KERNEL_FORMATS)
    for fmt in kit.KERNEL_FORMATS:
        kinds = {c.data.split(":")[0] for c in cases if c.fmt == fmt}
        assert {"seed", "edge"} <= kinds
    assert any(c.data.startswith("fixture") for c in cases)
    assert all(c.variants == ("dequant",) for c in cases)


def test_references_are_the_oracle_with_zero_tolerance():
    case = next(c for c in FAMILY.default_cases() if c.fmt == "iq1_m" and c.data.startswith("edge"))
    host = FAMILY.make_inputs(case)
    refs = {r.label: r for r in FAMILY.reference(case, host)}
    oracle = get_format("iq1_m").dequantize(host["raw"])
    assert refs["gguf f32"].tol == 0.0 and refs["gguf f32 bits"].tol == 0.0
    assert np.array_equal(refs["gguf f32 bits"].ref, oracle.view(np.uint32).astype(np.float64))
    assert 0.0 < refs["f64 exact"].tol < np.inf
    assert refs["gguf f32 bits"].output == "y_bits"


