"""K-quants (256-value super-blocks with 6-bit or 8-bit sub-block scales). gguf-py is the oracle.

Q3_K and Q6_K keep d last (bytes 108 and 208), Q2_K keeps d and dmin last (bytes 80 and 82);
Q4_K and Q5_K start with d and dmin.
"""
from __future__ import annotations

from gguf import GGMLQuantizationType as T

from strata_bench.formats._common import Fp16At, ScaledFormat


class Q2_K(ScaledFormat, name="q2_k", block_size=256, type_size=84, qtype=T.Q2_K):
    scales = (Fp16At("d", 80), Fp16At("dmin", 82))  # scales[16] (4-bit scale, 4-bit min), qs[64], d, dmin


class Q3_K(ScaledFormat, name="q3_k", block_size=256, type_size=110, qtype=T.Q3_K):
    scales = (Fp16At("d", 108),)  # hmask[32], qs[64], scales[12], d


class Q4_K(ScaledFormat, name="q4_k", block_size=256, type_size=144, qtype=T.Q4_K):
    scales = (Fp16At("d", 0), Fp16At("dmin", 2))  # d, dmin, scales[12], qs[128]


class Q5_K(ScaledFormat, name="q5_k", block_size=256, type_size=176, qtype=T.Q5_K):
    scales = (Fp16At("d", 0), Fp16At("dmin", 2))  # d, dmin, scales[12], qh[32], qs[128]


class Q6_K(ScaledFormat, name="q6_k", block_size=256, type_size=210, qtype=T.Q6_K):
    scales = (Fp16At("d", 208),)  # ql[128], qh[64], int8 scales[16], d
