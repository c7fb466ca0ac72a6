"""The 4-bit float formats MXFP4 and NVFP4: E2M1 codes (nibbles) times a minifloat block scale.

gguf-py is the oracle. MXFP4 (32 values, 17 bytes): E8M0 exponent byte e, then qs[16] (low nibbles
are elements 0-15, high nibbles 16-31). NVFP4 (64 values, 36 bytes): four UE4M3 scale bytes, one per
16 values, then qs[32], 8 bytes per sub-block (low nibble element j, high nibble j + 8). NVFP4 has no
second-level scale inside the block: a per-tensor scale, where a model has one, is applied outside.
A value is an E2M1 code times its scale, both exact in float32, so gguf-py's float32 is exact.
"""
from __future__ import annotations

import numpy as np
from gguf import GGMLQuantizationType as T

from strata_bench.formats._common import ScaledFormat
from strata_bench.formats._minifloat import E8M0At, UE4M3At


class MXFP4(ScaledFormat, name="mxfp4", block_size=32, type_size=17, qtype=T.MXFP4):
    scales = (E8M0At("e", 0),)  # e, qs[16]

    def edge_cases(self, rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
        # The largest finite E8M0 scale, 2^127, with E2M1 codes +-0.5 (0x1 and 0x9) keeps values finite.
        top = np.full((1, self.type_size), 0x91, dtype=np.uint8)
        top = self._with_scale_bits(top, self.scales[0].largest_bits)
        return super().edge_cases(rng) + [("largest finite scale 2^127, codes +-0.5", top[0])]


class NVFP4(ScaledFormat, name="nvfp4", block_size=64, type_size=36, qtype=T.NVFP4):
    scales = tuple(UE4M3At(f"d{k}", k) for k in range(4))  # d[4] (one per 16 values), qs[32]
