"""Scale fields that are not fp16: MXFP4's E8M0 exponent byte and NVFP4's UE4M3 bytes.

`decode` gives the scale as the OCP microscaling formats define it (E8M0: 2^(e-127); UE4M3: an
unsigned float with 4 exponent bits of bias 7 and 3 mantissa bits). ggml and gguf-py multiply by half
of it, because their E2M1 code table holds doubled values; the product is the same, and with the
scale at 1.0 gguf-py's values are the plain E2M1 values, so a format's unit values stay exact.
Both decode exactly into float64 (a power of two; at most 4 significant bits times a power of two).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from strata_bench.formats._common import ScaleField


@dataclass(frozen=True)
class _ByteAt(ScaleField):
    """A one-byte scale code at a byte offset of the block."""

    name: str
    offset: int

    hex_digits = 2

    def read_bits(self, blocks: np.ndarray) -> np.ndarray:
        return blocks[:, self.offset].copy()

    def write_bits(self, blocks: np.ndarray, bits) -> None:
        blocks[:, self.offset] = np.broadcast_to(np.asarray(bits, dtype=np.uint8), (blocks.shape[0],))

    def encode(self, values) -> np.ndarray:
        """The code whose scale is nearest each value (ties to the smaller code)."""
        codes = np.asarray(self._codes(), dtype=np.uint8)
        table = self.decode(codes)
        order = np.argsort(table, kind="stable")
        table, codes = table[order], codes[order]
        values = np.asarray(values, dtype=np.float64)
        right = np.clip(np.searchsorted(table, values), 1, len(table) - 1)
        nearer_left = np.abs(values - table[right - 1]) <= np.abs(table[right] - values)
        return codes[np.where(nearer_left, right - 1, right)].astype(np.uint8)

    def _codes(self) -> range:
        """The codes `encode` may choose: every code with a finite, ordinary meaning."""
        raise NotImplementedError


@dataclass(frozen=True)
class E8M0At(_ByteAt):
    """An E8M0 scale byte e: the power of two 2^(e-127).

    ggml gives e = 255 the value 2^128 as well (the OCP spec calls it NaN); it has no zero. Random
    codes are 2^-14 .. 2^-7, so that E2M1 values (at most 6) times them stay near the other formats'.
    """

    unit_bits = 127
    zero_bits = None
    largest_bits = 254  # 2^127, the largest finite E8M0 scale (OCP)
    RANDOM_CODES = (127 - 14, 127 - 7)  # inclusive
    LARGEST_FINITE_VALUES = 252  # 6 * 2^125 fits float32, 6 * 2^126 does not

    def decode(self, bits: np.ndarray) -> np.ndarray:
        return np.ldexp(1.0, np.asarray(bits, dtype=np.int64) - 127)

    def random_bits(self, rng: np.random.Generator, n: int) -> np.ndarray:
        low, high = self.RANDOM_CODES
        return rng.integers(low, high + 1, size=n, dtype=np.int64).astype(np.uint8)

    def edge_scales(self) -> list[tuple[str, int, str]]:
        # No zero scale: the all-zero block is the "codes all 0x00" case (E2M1 code 0 is 0).
        return [("smallest scale 2^-127", 0, "loud"),
                ("scale 2^-126", 1, "random"),
                ("largest scale with finite values 2^125", self.LARGEST_FINITE_VALUES, "loud")]

    def _codes(self) -> range:
        return range(0, 255)


@dataclass(frozen=True)
class UE4M3At(_ByteAt):
    """An unsigned E4M3 scale byte: 4 exponent bits (bias 7), 3 mantissa bits, bit 7 unused.

    Exponent 0 is subnormal (m * 2^-9). As in ggml, 0x7F (NaN in E4M3) reads as zero and bit 7 is
    ignored. Random codes are 0x01 .. 0x1F (2^-9 .. 0.117), subnormals included.
    """

    unit_bits = 0x38  # exponent 7, mantissa 0
    zero_bits = 0
    largest_bits = 0x7E  # 448
    RANDOM_CODES = (0x01, 0x1F)  # inclusive

    def decode(self, bits: np.ndarray) -> np.ndarray:
        bits = np.asarray(bits, dtype=np.int64)
        exponent, mantissa = (bits >> 3) & 0xF, (bits & 7).astype(np.float64)
        value = np.where(exponent == 0, np.ldexp(mantissa, -9), np.ldexp(1.0 + mantissa / 8, exponent - 7))
        return np.where((bits == 0) | (bits == 0x7F), 0.0, value)

    def random_bits(self, rng: np.random.Generator, n: int) -> np.ndarray:
        low, high = self.RANDOM_CODES
        return rng.integers(low, high + 1, size=n, dtype=np.int64).astype(np.uint8)

    def edge_scales(self) -> list[tuple[str, int, str]]:
        return [("zero scale", 0, "random"),
                ("smallest subnormal scale", 0x01, "loud"),
                ("largest subnormal scale", 0x07, "random"),
                ("largest finite scale", self.largest_bits, "loud"),
                ("NaN code 0x7f (read as zero)", 0x7F, "loud")]

    def _codes(self) -> range:
        return range(0, 0x7F)
