"""Q2_0 as upstream ggml defines it (GGML_TYPE_Q2_0, GGUF type id 42, added July 2026), registered
as `q2_0_ggml`. The name `q2_0` belongs to the engine's own format (strata_bench.formats.q2_0),
which has the same block size and a different layout and values, and no GGUF type id.

gguf-py 0.19 does not know type 42, so this numpy reference, written from ggml's definition
(`dequantize_row_q2_0` in ggml-quants.c), is the oracle. Block of 64 values in 18 bytes: fp16 d,
then qs[16]. Element j has the 2-bit code q = (qs[j // 4] >> (2 * (j % 4))) & 3 and the value
(q - 1) * d, one of {-1, 0, 1, 2} * d. Those products are exact in float32.
"""
from __future__ import annotations

import numpy as np

from strata_bench.formats._common import Fp16At, ScaledFormat

GGUF_TYPE_ID = 42  # GGML_TYPE_Q2_0 upstream
_SHIFTS = np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4)


class Q2_0Ggml(ScaledFormat, name="q2_0_ggml", block_size=64, type_size=18, qtype=None):
    scales = (Fp16At("d", 0),)

    @property
    def gguf_type_id(self) -> int:
        return GGUF_TYPE_ID

    def dequantize(self, raw: np.ndarray) -> np.ndarray:
        raw = np.ascontiguousarray(raw, dtype=np.uint8)
        blocks = self.blocks(raw)
        d = blocks[:, :2].copy().view(np.float16).astype(np.float32)  # (n, 1)
        # codes[n, b, k] is element 4*b + k: shift 2k of byte b.
        codes = (blocks[:, 2:, None] >> _SHIFTS) & np.uint8(3)
        levels = codes.reshape(-1, self.block_size).astype(np.float32) - np.float32(1)
        values = d * levels
        return values.reshape(*raw.shape[:-1], raw.shape[-1] // self.type_size * self.block_size)
