"""Q2_0, this project's own 2-bit format (the engine's): registered as `q2_0`, the name its kernels
and seed cases use. Not a ggml type: this numpy reference is the oracle, and it has no GGUF type id,
so it is never written to GGUF. Upstream ggml's later Q2_0 (type id 42, same block size, other layout
and values) is a different format, `q2_0_ggml` (strata_bench.formats.q2_0_ggml).

Block of 64 values in 18 bytes: fp16 d, then qs[16]. Element j has the 2-bit code
q = (qs[j % 16] >> (2 * (j // 16))) & 3 and the value d * (2q - 3), one of {-3, -1, 1, 3} * d.
"""
from __future__ import annotations

import numpy as np

from strata_bench.formats._common import Fp16At, ScaledFormat

_SHIFTS = np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 4, 1)


class Q2_0(ScaledFormat, name="q2_0", block_size=64, type_size=18, qtype=None):
    scales = (Fp16At("d", 0),)

    def dequantize(self, raw: np.ndarray) -> np.ndarray:
        raw = np.ascontiguousarray(raw, dtype=np.uint8)
        blocks = self.blocks(raw)
        d = blocks[:, :2].copy().view(np.float16).astype(np.float32)  # (n, 1)
        # codes[n, r, c] is element 16*r + c: shift 2r of byte c.
        codes = (blocks[:, None, 2:] >> _SHIFTS) & np.uint8(3)
        levels = codes.reshape(-1, self.block_size).astype(np.float32) * np.float32(2) - np.float32(3)
        values = d * levels
        return values.reshape(*raw.shape[:-1], raw.shape[-1] // self.type_size * self.block_size)

    def quantize(self, values: np.ndarray) -> np.ndarray:
        """Nearest code with d = max|x| / 3 (so the largest magnitude is exact up to fp16 rounding)."""
        values = np.ascontiguousarray(values, dtype=np.float32)
        if values.shape[-1] % self.block_size:
            raise ValueError(f"row length {values.shape[-1]} is not a multiple of {self.block_size}")
        x = values.reshape(-1, self.block_size)
        d = (np.abs(x).max(axis=1, keepdims=True) / np.float32(3)).astype(np.float16)
        d32 = d.astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            scaled = np.where(d32 == 0, 0, x / d32)
        codes = np.clip(np.round((scaled + 3) / 2), 0, 3).astype(np.uint8).reshape(-1, 4, 16)
        qs = codes[:, 0] | (codes[:, 1] << 2) | (codes[:, 2] << 4) | (codes[:, 3] << 6)
        blocks = np.concatenate([d.view(np.uint8).reshape(-1, 2), qs], axis=1)
        return blocks.reshape(*values.shape[:-1], values.shape[-1] // self.block_size * self.type_size)
