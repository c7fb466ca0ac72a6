"""I-quants (llama.cpp's lattice/codebook formats). gguf-py is the oracle; it has no quantizer for them,
so real i-quant weights come from llama.cpp's reference quantizer (`strata_bench.data.requantize`).

Every i-quant except IQ1_M starts with an fp16 d; IQ1_M spreads its d over the top nibbles of the
four u16 scale words that end the block.
"""
from __future__ import annotations

from gguf import GGMLQuantizationType as T

from strata_bench.formats._common import Fp16At, Fp16InTopNibbles, ScaledFormat

_D_FIRST = (Fp16At("d", 0),)


class IQ1_S(ScaledFormat, name="iq1_s", block_size=256, type_size=50, qtype=T.IQ1_S):
    scales = _D_FIRST  # d, qs[32], u16 qh[8]


class IQ1_M(ScaledFormat, name="iq1_m", block_size=256, type_size=56, qtype=T.IQ1_M):
    scales = (Fp16InTopNibbles("d", 48),)  # qs[32], qh[16], u16 scales[4] (d in their top nibbles)


class IQ2_XXS(ScaledFormat, name="iq2_xxs", block_size=256, type_size=66, qtype=T.IQ2_XXS):
    scales = _D_FIRST  # d, u16 qs[32]


class IQ2_XS(ScaledFormat, name="iq2_xs", block_size=256, type_size=74, qtype=T.IQ2_XS):
    scales = _D_FIRST  # d, u16 qs[32], scales[8]


class IQ2_S(ScaledFormat, name="iq2_s", block_size=256, type_size=82, qtype=T.IQ2_S):
    scales = _D_FIRST  # d, qs[64], qh[8], scales[8]


class IQ3_XXS(ScaledFormat, name="iq3_xxs", block_size=256, type_size=98, qtype=T.IQ3_XXS):
    scales = _D_FIRST  # d, qs[64] grid indexes, u32 sign+scale words[8]


class IQ3_S(ScaledFormat, name="iq3_s", block_size=256, type_size=110, qtype=T.IQ3_S):
    scales = _D_FIRST  # d, qs[64], qh[8], signs[32], scales[4]


class IQ4_NL(ScaledFormat, name="iq4_nl", block_size=32, type_size=18, qtype=T.IQ4_NL):
    scales = _D_FIRST  # d, qs[16] nibbles into kvalues_iq4nl


class IQ4_XS(ScaledFormat, name="iq4_xs", block_size=256, type_size=136, qtype=T.IQ4_XS):
    scales = _D_FIRST  # d, u16 scales_h, scales_l[4], qs[128]
