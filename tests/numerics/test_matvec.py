"""numerics.matvec: the exact weight values the float64 references start from."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.data.synthetic import synthetic_weights
from strata_bench.data.weights import KERNEL_FORMATS
from strata_bench.formats import get_format
from strata_bench.numerics.matvec import exact_weights


def _blocks(fmt: str, seed: int = 3) -> np.ndarray:
    """Edge blocks (zero, subnormal, 65504 and -65504 scales, extreme codes, an outlier) then random ones."""
    f = get_format(fmt)
    return synthetic_weights(fmt, 6, f.block_size * 16, seed, edge=True).reshape(-1, f.type_size)


@pytest.mark.parametrize("fmt", KERNEL_FORMATS)
def test_float32_dequantization_is_exact(fmt):
    """The references widen gguf's float32 values: that must equal the format's exact float64 values."""
    blocks = _blocks(fmt, seed=9)
    assert np.array_equal(exact_weights(fmt, blocks), get_format(fmt).dequantize_f64(blocks))


@pytest.mark.parametrize("rows, ref_rows", [(37, 4096), (1000, 128), (1000, 333)])
def test_float32_weights_give_the_float64_weights_references_bit_for_bit(rows, ref_rows):
    """Widened a block of rows at a time into one reused array: the same products as the float64 matrix."""
    from strata_bench.numerics.matvec import matvec_reference
    from strata_bench.numerics.q8_1 import quantize_q8_1

    rng = np.random.default_rng(rows)
    raw = synthetic_weights("q8_0", rows, 256, 5).reshape(rows, -1)
    x = rng.standard_normal((3, 256)).astype(np.float32)
    act = quantize_q8_1(x)
    wide = matvec_reference(exact_weights("q8_0", raw), x, act, ref_rows)
    narrow = matvec_reference(exact_weights("q8_0", raw, np.float32), x, act, ref_rows)
    assert exact_weights("q8_0", raw, np.float32).dtype == np.float32
    for a, b in zip(vars(wide).values(), vars(narrow).values()):
        assert a.dtype == b.dtype == np.float64 and a.tobytes() == b.tobytes()
