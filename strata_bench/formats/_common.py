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

from strata_bench.formats.base import QuantFormat

FP16_ONE = np.float16(1.0).view(np.uint16)
FP16_MAX = np.float16(65504.0)
FP16_SMALLEST_SUBNORMAL = np.uint16(0x0001).view(np.float16)
FP16_LARGEST_SUBNORMAL = np.uint16(0x03FF).view(np.float16)
RANDOM_SCALE_SIGMA = 1e-3  # small enough that products and fp16 partial sums stay finite
OUTLIER_TARGET = 3e4  # the largest value of the "outlier row" block


class ScaleField:
    """A block's scale field: where its code bits sit, and what scale each code means.

    Subclasses give `read_bits`/`write_bits` (the raw code at its place in the block) and the number
    system: `decode` (exact float64), `encode` (nearest code), the codes for 1.0, 0 (None where the
    system has no zero) and the largest finite scale, seeded random codes, and the edge scales.
    """

    name: str
    unit_bits: ClassVar[int]
    zero_bits: ClassVar[int | None]
    largest_bits: ClassVar[int]
    hex_digits: ClassVar[int]

    def read_bits(self, blocks: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def write_bits(self, blocks: np.ndarray, bits) -> None:
        raise NotImplementedError

    def decode(self, bits: np.ndarray) -> np.ndarray:
        """float64 scale of each code, exactly."""
        raise NotImplementedError

    def encode(self, values) -> np.ndarray:
        """The nearest code of each value."""
        raise NotImplementedError

    def random_bits(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Seeded codes of small finite scales."""
        raise NotImplementedError

    def edge_scales(self) -> list[tuple[str, int, str]]:
        """(label, code, codes) edge cases; codes is "random" or "loud" (the largest |value| pattern)."""
        raise NotImplementedError

    def read(self, blocks: np.ndarray) -> np.ndarray:
        return self.decode(self.read_bits(blocks))


class Fp16Field(ScaleField):
    """An IEEE fp16 scale."""

    unit_bits = int(FP16_ONE)
    zero_bits = 0
    largest_bits = 0x7BFF
    hex_digits = 4

    def decode(self, bits: np.ndarray) -> np.ndarray:
        return np.asarray(bits, dtype=np.uint16).view(np.float16).astype(np.float64)

    def encode(self, values) -> np.ndarray:
        return fp16_bits(values)

    def random_bits(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return fp16_bits(rng.standard_normal(n, dtype=np.float32) * np.float32(RANDOM_SCALE_SIGMA))

    def edge_scales(self) -> list[tuple[str, int, str]]:
        return [("zero scale", 0, "random"),
                ("smallest subnormal scale", int(fp16_bits(FP16_SMALLEST_SUBNORMAL)), "loud"),
                ("largest subnormal scale", int(fp16_bits(FP16_LARGEST_SUBNORMAL)), "random"),
                ("largest finite scale", int(fp16_bits(FP16_MAX)), "loud"),
                ("largest finite negative scale", int(fp16_bits(-FP16_MAX)), "loud")]


@dataclass(frozen=True)
class Fp16At(Fp16Field):
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
class Fp16InTopNibbles(Fp16Field):
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


def fp16_bits(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32).astype(np.float16).view(np.uint16)


class ScaledFormat(QuantFormat):
    """A format whose values are linear in its scale fields; subclasses set `scales` and the oracle.

    All fields of one format use one number system (fp16, or E8M0, or UE4M3).
    """

    scales: ClassVar[tuple[ScaleField, ...]] = ()

    @property
    def gguf_type_id(self) -> int | None:
        """The GGUF tensor type id this format is read from and written as; None: not a GGUF type."""
        return None if self.qtype is None else int(self.qtype)

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
            total += field.read(blocks)[:, None] * self.unit_values(blocks, field)
        return total.reshape(*raw.shape[:-1], raw.shape[-1] // self.type_size * self.block_size)

    def unit_values(self, blocks: np.ndarray, field: ScaleField) -> np.ndarray:
        """float64 (n, block_size): the values with `field` set to 1.0 and every other scale to 0."""
        unit = blocks.copy()
        for other in self.scales:
            if other != field and other.zero_bits is None:
                raise TypeError(f"{self.name}: {other.name} has no zero code, so its fields cannot be separated")
            other.write_bits(unit, other.unit_bits if other == field else other.zero_bits)
        return self.dequantize(unit).reshape(-1, self.block_size).astype(np.float64)

    def scale_values(self, blocks: np.ndarray) -> dict[str, np.ndarray]:
        """The scale field(s) of each block, by field name, as float32."""
        blocks = self.blocks(blocks)
        return {f.name: f.read(blocks).astype(np.float32) for f in self.scales}

    # --- generators ---------------------------------------------------------------------------
    def random_blocks(self, rng: np.random.Generator, n_blocks: int) -> np.ndarray:
        # Any code bytes are valid (every index width matches its table); only the scales need care.
        blocks = rng.integers(0, 256, size=(n_blocks, self.type_size), dtype=np.uint8)
        for field in self.scales:
            field.write_bits(blocks, field.random_bits(rng, n_blocks))
        return blocks

    def edge_cases(self, rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
        """Named edge-case blocks (name, (type_size,) uint8); `edge_blocks` stacks them in this order."""
        codes = self.random_blocks(rng, 1)
        loud = self._extreme_codes["largest |value|"][None, :]
        cases = [(label, self._with_scale_bits(loud if which == "loud" else codes, bits))
                 for label, bits, which in self.scales[0].edge_scales()]
        for label, pattern in self._extreme_codes.items():
            cases.append((f"codes {label}", self._with_scales(pattern[None, :], 0.01)))
        outlier = self._outlier(codes)
        peak = float(np.abs(self.dequantize_f64(outlier)).max())
        # A format whose largest value is below the target (NVFP4: 448 * 6) gets its loudest block instead.
        reached = peak >= OUTLIER_TARGET / 2
        label = f"outlier ~{OUTLIER_TARGET:g}" if reached else f"outlier at the largest value {peak:g}"
        cases.append((label, outlier))
        return [(name, block[0]) for name, block in cases]

    def edge_blocks(self, rng: np.random.Generator) -> np.ndarray:
        return np.stack([block for _, block in self.edge_cases(rng)])

    def _with_scales(self, blocks: np.ndarray, value) -> np.ndarray:
        """Every scale field set to the code nearest `value`."""
        out = blocks.copy()
        for field in self.scales:
            field.write_bits(out, field.encode(value))
        return out

    def _with_scale_bits(self, blocks: np.ndarray, bits: int) -> np.ndarray:
        out = blocks.copy()
        for field in self.scales:
            field.write_bits(out, bits)
        return out

    def _unit_sum(self, blocks: np.ndarray) -> np.ndarray:
        """Values with every scale field at 1.0: the shape a common scale multiplies."""
        return sum(self.unit_values(blocks, f) for f in self.scales)

    def _outlier(self, codes: np.ndarray) -> np.ndarray:
        peak = np.abs(self._unit_sum(codes)).max()
        largest = float(self.scales[0].decode(np.array([self.scales[0].largest_bits]))[0])
        if peak * largest < OUTLIER_TARGET:  # codes too quiet to reach the target: use loud ones
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
            scale = float(field.read(block)[0])
            parts.append(f"{field.name}={scale:.6g} (0x{bits:0{field.hex_digits}x})")
        values = self.dequantize_f64(block).ravel()
        head = ", ".join(f"{v:.6g}" for v in values[:n_values])
        parts.append(f"max|v|={np.abs(values).max():.6g}")
        parts.append(f"first values [{head}]")
        return " ".join(parts)
