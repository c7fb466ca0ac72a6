"""The ternary formats TQ1_0 and TQ2_0 (values d * {-1, 0, 1}; TQ2_0's code 3 gives 2d). gguf-py is
the oracle. Both keep the fp16 d last.

TQ1_0 (256 values, 54 bytes): qs[48] and qh[4] hold five (qs) or four (qh) base-3 digits per byte
as a fixed-point fraction, then d at byte 52. TQ2_0 (256 values, 66 bytes): qs[64] with four 2-bit
codes per byte, then d at byte 64. Every byte decodes to valid digits, so any code bytes are a block.
"""
from __future__ import annotations

from gguf import GGMLQuantizationType as T

from strata_bench.formats._common import Fp16At, ScaledFormat


class TQ1_0(ScaledFormat, name="tq1_0", block_size=256, type_size=54, qtype=T.TQ1_0):
    scales = (Fp16At("d", 52),)  # qs[48], qh[4], d


class TQ2_0(ScaledFormat, name="tq2_0", block_size=256, type_size=66, qtype=T.TQ2_0):
    scales = (Fp16At("d", 64),)  # qs[64], d
