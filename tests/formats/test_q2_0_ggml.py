"""Upstream ggml's Q2_0 (type id 42), registered as q2_0_ggml: its numpy oracle against ggml's definition,
exact values, and that it is not the engine's q2_0."""
from __future__ import annotations

import numpy as np

from strata_bench.formats import get_format


def _f16(raw: bytes) -> float:
    return float(np.frombuffer(raw, dtype=np.float16)[0])


def slow_q2_0_ggml(b: bytes) -> list[float]:
    """ggml's dequantize_row_q2_0: element j is 2-bit field j % 4 of byte j / 4, value (q - 1) * d."""
    d = _f16(b[0:2])
    return [(((b[2 + j // 4] >> (2 * (j % 4))) & 3) - 1) * d for j in range(64)]


def test_dequantize_f64_equals_a_slow_float64_decode(assert_slow_decode):
    assert_slow_decode("q2_0_ggml", slow_q2_0_ggml)


def test_float32_oracle_follows_the_definition_element_by_element(samples):
    fmt = get_format("q2_0_ggml")
    assert (fmt.name, fmt.block_size, fmt.type_size, fmt.qtype, fmt.gguf_type_id) == ("q2_0_ggml", 64, 18, None, 42)
    block = np.zeros((1, 18), dtype=np.uint8)
    block[0, :2] = np.frombuffer(np.float16(0.5).tobytes(), dtype=np.uint8)
    block[0, 2] = 0b11_10_01_00  # elements 0..3 -> codes 0, 1, 2, 3
    block[0, 17] = 0b00_01_10_11  # elements 60..63 -> codes 3, 2, 1, 0
    values = fmt.dequantize(block)[0]
    assert values.dtype == np.float32
    assert values[:4].tolist() == [-0.5, 0.0, 0.5, 1.0]
    assert values[60:].tolist() == [1.0, 0.5, 0.0, -0.5]
    assert values[4:60].tolist() == [-0.5] * 56  # code 0 elsewhere
    blocks = samples(fmt)
    # d times -1, 0, 1 or 2 is exact in float32: the float32 oracle holds the exact values.
    np.testing.assert_array_equal(fmt.dequantize(blocks).astype(np.float64), fmt.dequantize_f64(blocks))


def test_upstream_and_engine_q2_0_read_the_same_bytes_differently():
    ggml, engine = get_format("q2_0_ggml"), get_format("q2_0")
    assert (ggml.block_size, ggml.type_size) == (engine.block_size, engine.type_size)
    blocks = ggml.random_blocks(np.random.default_rng(1), 20)
    assert not np.array_equal(ggml.dequantize(blocks), engine.dequantize(blocks))
    d = ggml.scale_values(blocks)["d"].astype(np.float64)[:, None]
    assert set(np.unique(ggml.dequantize_f64(blocks) / d)) == {-1.0, 0.0, 1.0, 2.0}
    assert set(np.unique(engine.dequantize_f64(blocks) / d)) == {-3.0, -1.0, 1.0, 3.0}
    assert engine.gguf_type_id is None and ggml.gguf_type_id == 42
