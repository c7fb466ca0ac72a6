"""What most formats share: fp16 scale fields at known byte positions, and everything derived from them.

A block's values are linear in its fp16 scale field(s): value = sum over fields of scale * unit value,
where the unit value is what the codes give with that scale set to 1.0 and the others to 0. With a
unit scale gguf-py's float32 result is exact (small integers and dyadic rationals), so this gives
exact float64 values, and it lets one generic class make random and edge-case blocks for any layout.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

import numpy as np

from strata_bench.formats import QuantFormat

FP16_ONE = np.float16(1.0).view(np.uint16)
FP16_MAX = np.float16(65504.0)
FP16_SMALLEST_SUBNORMAL = np.uint16(0x0001).view(np.float16)
FP16_LARGEST_SUBNORMAL = np.uint16(0x03FF).view(np.float16)
RANDOM_SCALE_SIGMA = 1e-3  # small enough that products and fp16 partial sums stay finite
OUTLIER_TARGET = 3e4  # the largest value of the "outlier row" block


@dataclass(frozen=True)
class Fp16At:
    """An fp16 scale stored little-endian at a byte offset of the block."""

    name: str
    offset: int

    def read_bits(self, blocks: np.ndarray) -> np.ndarray:
        lo = blocks[:, self.offset].astype(np.uint16)
        hi = blocks[:, self.offset + 1].astype(np.uint16)
        return lo | (hi << np.uint16(8))

    def write_bits(self, blocks: np.ndarray, bits: np.ndarray) -> None:
        bits = np.broadcast_to(np.asarray(bits, dtype=np.uint16), (blocks.shape[0],))
        blocks[:, self.offset] = (bits & 0xFF).astype(np.uint8)
        blocks[:, self.offset + 1] = (bits >> 8).astype(np.uint8)


@dataclass(frozen=True)
class Fp16InTopNibbles:
    """IQ1_M's scale: nibble k of the fp16 bits is the top nibble of the k-th u16 word at `offset`.

    The low 12 bits of each word are sub-block scales and must be kept when the scale is written.
    """

    name: str
    offset: int

    def _high_bytes(self) -> list[int]:
        # The top nibble of a little-endian u16 word is the high nibble of its second byte.
        return [self.offset + 2 * k + 1 for k in range(4)]

    def read_bits(self, blocks: np.ndarray) -> np.ndarray:
        bits = np.zeros(blocks.shape[0], dtype=np.uint16)
        for k, pos in enumerate(self._high_bytes()):
            bits |= (blocks[:, pos] >> 4).astype(np.uint16) << np.uint16(4 * k)
        return bits

    def write_bits(self, blocks: np.ndarray, bits: np.ndarray) -> None:
        bits = np.broadcast_to(np.asarray(bits, dtype=np.uint16), (blocks.shape[0],))
        for k, pos in enumerate(self._high_bytes()):
            nibble = ((bits >> np.uint16(4 * k)) & 0xF).astype(np.uint8)
            blocks[:, pos] = (blocks[:, pos] & 0x0F) | (nibble << 4)


ScaleField = Fp16At | Fp16InTopNibbles


def fp16_bits(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32).astype(np.float16).view(np.uint16)


class ScaledFormat(QuantFormat):
    """A format whose values are linear in fp16 scale fields; subclasses set `scales` and the oracle."""

    scales: ClassVar[tuple[ScaleField, ...]] = ()

    # --- values -------------------------------------------------------------------------------
    def dequantize(self, raw: np.ndarray) -> np.ndarray:
        import gguf

        raw = np.ascontiguousarray(raw, dtype=np.uint8)
        return gguf.quants.dequantize(raw, self.qtype)

    def dequantize_f64(self, raw: np.ndarray) -> np.ndarray:
        raw = np.ascontiguousarray(raw, dtype=np.uint8)
        blocks = self.blocks(raw)
        total = np.zeros((blocks.shape[0], self.block_size), dtype=np.float64)
        for field in self.scales:
            scale = field.read_bits(blocks).view(np.float16).astype(np.float64)
            total += scale[:, None] * self.unit_values(blocks, field)
        return total.reshape(*raw.shape[:-1], raw.shape[-1] // self.type_size * self.block_size)

    def unit_values(self, blocks: np.ndarray, field: ScaleField) -> np.ndarray:
        """float64 (n, block_size): the values with `field` set to 1.0 and every other scale to 0."""
        unit = blocks.copy()
        for other in self.scales:
            other.write_bits(unit, FP16_ONE if other == field else 0)
        return self.dequantize(unit).reshape(-1, self.block_size).astype(np.float64)

    def scale_values(self, blocks: np.ndarray) -> dict[str, np.ndarray]:
        """The fp16 scale field(s) of each block, by field name, as float32."""
        blocks = self.blocks(blocks)
        return {f.name: f.read_bits(blocks).view(np.float16).astype(np.float32) for f in self.scales}

    # --- generators ---------------------------------------------------------------------------
    def random_blocks(self, rng: np.random.Generator, n_blocks: int) -> np.ndarray:
        # Any code bytes are valid (every index width matches its table); only the scales need care.
        blocks = rng.integers(0, 256, size=(n_blocks, self.type_size), dtype=np.uint8)
        sigma = np.float32(RANDOM_SCALE_SIGMA)
        for field in self.scales:
            field.write_bits(blocks, fp16_bits(rng.standard_normal(n_blocks, dtype=np.float32) * sigma))
        return blocks

    def edge_cases(self, rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
        """Named edge-case blocks (name, (type_size,) uint8); `edge_blocks` stacks them in this order."""
        codes = self.random_blocks(rng, 1)
        loud = self._extreme_codes["largest |value|"][None, :]
        cases = [
            ("zero scale", self._with_scales(codes, 0.0)),
            ("smallest subnormal scale", self._with_scales(loud, FP16_SMALLEST_SUBNORMAL)),
            ("largest subnormal scale", self._with_scales(codes, FP16_LARGEST_SUBNORMAL)),
            ("largest finite scale", self._with_scales(loud, FP16_MAX)),
            ("largest finite negative scale", self._with_scales(loud, -FP16_MAX)),
        ]
        for label, pattern in self._extreme_codes.items():
            cases.append((f"codes {label}", self._with_scales(pattern[None, :], 0.01)))
        cases.append((f"outlier ~{OUTLIER_TARGET:g}", self._outlier(codes)))
        return [(name, block[0]) for name, block in cases]

    def edge_blocks(self, rng: np.random.Generator) -> np.ndarray:
        return np.stack([block for _, block in self.edge_cases(rng)])

    def _with_scales(self, blocks: np.ndarray, value) -> np.ndarray:
        out = blocks.copy()
        for field in self.scales:
            field.write_bits(out, fp16_bits(value))
        return out

    def _unit_sum(self, blocks: np.ndarray) -> np.ndarray:
        """Values with every scale field at 1.0: the shape a common scale multiplies."""
        return sum(self.unit_values(blocks, f) for f in self.scales)

    def _outlier(self, codes: np.ndarray) -> np.ndarray:
        peak = np.abs(self._unit_sum(codes)).max()
        if peak * float(FP16_MAX) < OUTLIER_TARGET:  # codes too quiet to reach the target: use loud ones
            codes = self._extreme_codes["largest |value|"][None, :]
            peak = np.abs(self._unit_sum(codes)).max()
        return self._with_scales(codes, OUTLIER_TARGET / peak)

    @cached_property
    def _extreme_codes(self) -> dict[str, np.ndarray]:
        """Blocks of one repeated code byte: all-0x00, all-0xFF, and the byte giving the largest |value|.

        Scale fields are overwritten later, so only the code bytes matter here.
        """
        candidates = np.repeat(np.arange(256, dtype=np.uint8)[:, None], self.type_size, axis=1)
        peaks = np.abs(self._unit_sum(self._with_scales(candidates, 1.0))).max(axis=1)
        loudest = int(np.argmax(peaks))
        return {"all 0x00": candidates[0], "all 0xFF": candidates[255],
                "largest |value|": candidates[loudest]}

    # --- diagnosis ----------------------------------------------------------------------------
    def describe_block(self, raw_block: np.ndarray, n_values: int = 8) -> str:
        block = self.blocks(raw_block)[:1]
        parts = [self.name]
        for field in self.scales:
            bits = int(field.read_bits(block)[0])
            parts.append(f"{field.name}={float(np.uint16(bits).view(np.float16)):.6g} (0x{bits:04x})")
        values = self.dequantize_f64(block).ravel()
        head = ", ".join(f"{v:.6g}" for v in values[:n_values])
        parts.append(f"max|v|={np.abs(values).max():.6g}")
        parts.append(f"first values [{head}]")
        return " ".join(parts)
