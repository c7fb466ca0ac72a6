"""A case's weights and activations, and how they lie on the device: the i-quant formats and their CUDA
traits, weights from a data source (seeded, edge, real-weight fixtures), seeded activations, and the
padded row layout the kernels read (16-byte aligned rows, readable slack after the last one).
"""
from __future__ import annotations

import math

import numpy as np

from strata_bench.data.source import DataSource
from strata_bench.errors import InputError

# Formats of kernels_src/iq, in the order the case lists use; value = the CUDA traits struct.
KERNEL_FORMATS = ("iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m", "iq4_nl", "iq4_xs", "q8_0",
                  "q2_0")
ROW_ALIGN = 16  # device rows start 16-byte aligned (row stride rounded up)
TAIL_SLACK = 16  # readable bytes after the last row: the kernels' aligned word loads may touch them
ACT_SEED_OFFSET = 104729  # activations get their own random stream, independent of the weights
OUTLIER = 3.0e4  # the edge activations' outlier: the rest of its q8_1 block rounds to 0 or +-1
Q2_0_FIXTURE_SOURCE = "q8_0"  # q2_0 has no GGUF type: its fixture rows are the q8_0 rows requantized


def traits(fmt: str) -> str:
    """The CUDA traits struct of a format, as used in name expressions."""
    if fmt not in KERNEL_FORMATS:
        raise InputError(f"format {fmt!r} has no i-quant kernel; formats: {', '.join(KERNEL_FORMATS)}")
    return f"siq::fmt_{fmt}"


def row_stride(fmt: str, cols: int) -> int:
    """Bytes from one device row to the next: the format's row bytes rounded up to ROW_ALIGN."""
    from strata_bench.formats import get_format

    return -(-get_format(fmt).bytes_per_row(cols) // ROW_ALIGN) * ROW_ALIGN


def chunks_per_row(cols: int) -> int:
    """32-value chunks per row (an InputError unless cols is a positive multiple of 32)."""
    if cols <= 0 or cols % 32:
        raise InputError(f"inputs per row must be a positive multiple of 32, got {cols}")
    return cols // 32


def check_shape(fmt: str, cols: int) -> None:
    """An InputError unless a row of `cols` values is a whole number of the format's blocks."""
    from strata_bench.formats import get_format

    block = get_format(fmt).block_size
    if cols <= 0 or cols % block:
        raise InputError(f"{fmt}: inputs per row must be a positive multiple of {block}, got {cols}")


def weights(fmt: str, rows: int, cols: int, src: DataSource, salt: int = 0) -> tuple[np.ndarray, str]:
    """Raw blocks (rows, bytes_per_row) and a note on where they came from.

    Fixture rows are tiled (repeated) to `rows` when the fixture has fewer; q2_0 takes the q8_0
    fixture's values requantized by Q2_0.quantize. `salt` separates several matrices of one case.
    """
    from strata_bench.data.store import load_fixture
    from strata_bench.data.synthetic import synthetic_weights
    from strata_bench.formats import get_format

    if src.kind != "fixture":
        return synthetic_weights(fmt, rows, cols, src.seed * 1009 + salt, edge=src.edge), f"{src.kind}:{src.seed}"
    fix = load_fixture(src.fixture)
    if fix.cols != cols:
        raise InputError(f"fixture {src.fixture} has {fix.cols} inputs per row, the case {cols}")
    if fix.fmt == fmt:
        raw = fix.raw
    elif fmt == "q2_0":
        raw = get_format("q2_0").quantize(fix.values())
    else:
        raise InputError(f"fixture {src.fixture} is {fix.fmt}, the case {fmt}")
    reps = math.ceil(rows / fix.rows)
    note = f"fixture {src.fixture}" + (f" tiled x{reps}" if reps > 1 else "") + (
        " requantized to q2_0" if fmt != fix.fmt else "")
    return np.ascontiguousarray(np.tile(raw, (reps, 1))[:rows]), note


def padded(fmt: str, raw: np.ndarray) -> np.ndarray:
    """Flat uint8: rows at a 16-byte aligned stride, zero padding, TAIL_SLACK bytes after the last row."""
    rows, nbytes = raw.shape
    stride = -(-nbytes // ROW_ALIGN) * ROW_ALIGN
    out = np.zeros(rows * stride + TAIL_SLACK, dtype=np.uint8)
    out[: rows * stride].reshape(rows, stride)[:, :nbytes] = raw
    return out


def activations(cols: int, n: int, src: DataSource, salt: int = 0) -> np.ndarray:
    """float32 (n, cols) seeded standard-normal activations; with edge data, block 0 of every column is
    all zero (q8_1 d = 0) and block 1 starts with an outlier (the rest of its codes round to 0 or +-1)."""
    from strata_bench.data.synthetic import seeded_activations

    seed = src.seed if src.kind != "fixture" else 0
    x = seeded_activations(seed * 7 + ACT_SEED_OFFSET + salt, (n, cols))
    if src.edge:
        x[:, :32] = 0.0
        if cols > 32:
            x[:, 32] = OUTLIER
    return x
