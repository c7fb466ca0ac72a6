"""Synthetic data: seeded random weights (optionally with the format's edge-case blocks first) and
seeded activations, generated on the fly from (format, shape, seed, edge).

Kernel cases call `synthetic_weights` at large shapes, so it is vectorized.
"""
from __future__ import annotations

import numpy as np

from strata_bench.data.fixture import Fixture
from strata_bench.errors import InputError
from strata_bench.formats import QuantFormat, get_format

_EDGE_STREAM = 0xED6E  # second seed word of the edge blocks' own random stream


def synthetic_weights(fmt: str | QuantFormat, rows: int, cols: int, seed: int,
                      edge: bool = False) -> np.ndarray:
    """Seeded random blocks (rows, bytes_per_row) uint8; with `edge`, the edge-case blocks come first.

    The random blocks do not depend on `edge` (edge blocks come from their own stream and overwrite
    the first blocks), so an edge fixture differs from the plain one only at its start.
    """
    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    bytes_per_row = fmt.bytes_per_row(cols)
    if rows <= 0:
        raise InputError(f"row count {rows} must be positive")
    blocks = fmt.random_blocks(np.random.default_rng(seed), rows * (cols // fmt.block_size))
    if edge:
        special = fmt.edge_blocks(np.random.default_rng([seed, _EDGE_STREAM]))
        count = min(len(special), len(blocks))
        blocks[:count] = special[:count]
    return blocks.reshape(rows, bytes_per_row)


def seeded_activations(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    """float32 standard-normal activations, the same for the same seed and shape."""
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


SEED_MAX = 2**63 - 1


def check_request(fmt: str, rows: int, cols: int, seed: int, activation_rows: int = 0) -> None:
    """Refuse, before allocating anything, a seed numpy cannot take or a fixture this host cannot hold.

    The estimate counts the raw blocks, the float32 dequantization the manifest hashes (with a float64
    intermediate) and the activations; half of the available memory is the limit."""
    import psutil

    if not 0 <= seed <= SEED_MAX:
        raise InputError(f"bad seed {seed}: expected 0 <= seed <= {SEED_MAX}")
    if activation_rows < 0:
        raise InputError(f"bad --activations {activation_rows}: expected 0 or more rows")
    spec = get_format(fmt)
    if rows <= 0 or cols <= 0:
        raise InputError(f"bad shape {rows}x{cols} for {fmt}: expected positive ROWS and COLS")
    # bytes_per_row raises the format's own error for a row length it cannot split into blocks
    need = rows * spec.bytes_per_row(cols) + rows * cols * 12 + activation_rows * cols * 4
    available = psutil.virtual_memory().available
    if need > available // 2:
        raise InputError(f"shape {rows}x{cols} of {fmt} needs about {need / 2**30:.1f} GiB, more than half of "
                         f"the {available / 2**30:.1f} GiB available")


def make_synthetic(fmt: str, rows: int, cols: int, seed: int, edge: bool = False,
                   name: str | None = None, activation_rows: int = 0) -> Fixture:
    """A synthetic fixture with its provenance recorded (what `fixtures make` saves)."""
    fmt = get_format(fmt).name
    check_request(fmt, rows, cols, seed, activation_rows)
    name = name or f"{fmt}-{rows}x{cols}-s{seed}{'-edge' if edge else ''}"
    acts = seeded_activations(seed, (activation_rows, cols)) if activation_rows > 0 else None
    provenance = {"kind": "synthetic", "seed": seed, "generator": f"{__name__}.synthetic_weights", "edge": edge}
    if acts is not None:
        provenance["activations"] = {"generator": f"{__name__}.seeded_activations", "seed": seed}
    return Fixture(name, fmt, rows, cols, synthetic_weights(fmt, rows, cols, seed, edge), provenance, acts)
