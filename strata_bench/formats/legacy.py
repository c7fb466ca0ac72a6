"""The 32-value legacy formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1): fp16 scale(s) first, then the codes.

gguf-py both dequantizes (the oracle) and quantizes these, so `fixtures from-gguf --as` can make them.
"""
from __future__ import annotations

import numpy as np
from gguf import GGMLQuantizationType as T

from strata_bench.formats._common import Fp16At, ScaledFormat


class GgufQuantizable(ScaledFormat):
    """A format gguf-py can also quantize (bit-identical to ggml's reference quantizer)."""

    def quantize(self, values: np.ndarray) -> np.ndarray:
        import gguf

        return gguf.quants.quantize(np.ascontiguousarray(values, dtype=np.float32), self.qtype)


class Q8_0(GgufQuantizable, name="q8_0", block_size=32, type_size=34, qtype=T.Q8_0):
    scales = (Fp16At("d", 0),)  # d, int8 qs[32]


class Q4_0(GgufQuantizable, name="q4_0", block_size=32, type_size=18, qtype=T.Q4_0):
    scales = (Fp16At("d", 0),)  # d, qs[16] nibbles; value d*(q-8)


class Q4_1(GgufQuantizable, name="q4_1", block_size=32, type_size=20, qtype=T.Q4_1):
    scales = (Fp16At("d", 0), Fp16At("m", 2))  # value d*q + m


class Q5_0(GgufQuantizable, name="q5_0", block_size=32, type_size=22, qtype=T.Q5_0):
    scales = (Fp16At("d", 0),)  # d, u32 qh (fifth bits), qs[16]; value d*(q-16)


class Q5_1(GgufQuantizable, name="q5_1", block_size=32, type_size=24, qtype=T.Q5_1):
    scales = (Fp16At("d", 0), Fp16At("m", 2))  # d, m, u32 qh (fifth bits), qs[16]; value d*q + m
