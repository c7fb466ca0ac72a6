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
