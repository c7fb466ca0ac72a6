"""K-quants: exact float64 values against slow decoders of the layouts."""
from __future__ import annotations

import struct

import numpy as np
import pytest


def _f16(raw: bytes) -> float:
    return float(np.frombuffer(raw, dtype=np.float16)[0])


# --- slow decoders: one element at a time, from the block layouts / ggml's C loops ----------------
def slow_q4_k(b: bytes) -> list[float]:
    d, dmin, sc, qs = _f16(b[0:2]), _f16(b[2:4]), b[4:16], b[16:]
    out = []
    for sub in range(8):
        if sub < 4:
            scale, mins = sc[sub] & 63, sc[sub + 4] & 63
        else:
            scale = (sc[sub + 4] & 15) | ((sc[sub - 4] >> 6) << 4)
            mins = (sc[sub + 4] >> 4) | ((sc[sub] >> 6) << 4)
        chunk, high = divmod(sub, 2)
        for l in range(32):
            q = (qs[32 * chunk + l] >> (4 * high)) & 15
            out.append(d * scale * q - dmin * mins)
    return out


def slow_q6_k(b: bytes) -> list[float]:
    ql, qh, d = b[0:128], b[128:192], _f16(b[208:210])
    scales = struct.unpack("16b", b[192:208])
    out = [0.0] * 256
    for half in range(2):
        for l in range(32):
            lo, hi, h = ql[64 * half + l], ql[64 * half + l + 32], qh[32 * half + l]
            codes = (lo & 15 | (h & 3) << 4, hi & 15 | (h >> 2 & 3) << 4,
                     lo >> 4 | (h >> 4 & 3) << 4, hi >> 4 | (h >> 6 & 3) << 4)
            for k, q in enumerate(codes):
                out[128 * half + 32 * k + l] = d * scales[8 * half + l // 16 + 2 * k] * (q - 32)
    return out


def slow_q3_k(b: bytes) -> list[float]:
    hmask, qs, sc, d = b[0:32], b[32:96], b[96:108], _f16(b[108:110])
    scales = [((sc[i] if i < 8 else sc[i - 8] >> 4) & 15) | ((sc[8 + i % 4] >> (2 * (i // 4)) & 3) << 4)
              for i in range(16)]
    out = []
    for j in range(256):
        half, rest = divmod(j, 128)
        shift_pair, l = divmod(rest, 32)  # 32 values per 2-bit plane of 32 bytes
        q = (qs[32 * half + l] >> (2 * shift_pair)) & 3
        high = hmask[l] >> (4 * half + shift_pair) & 1
        out.append(d * (scales[j // 16] - 32) * (q - (0 if high else 4)))
    return out


def slow_q2_k(b: bytes) -> list[float]:
    scales, qs, d, dmin = b[0:16], b[16:80], _f16(b[80:82]), _f16(b[82:84])
    out = [0.0] * 256
    for half in range(2):  # 128 values from 32 code bytes each
        for shift in range(4):
            for part in range(2):
                sc = scales[8 * half + 2 * shift + part]
                for l in range(16):
                    q = (qs[32 * half + 16 * part + l] >> (2 * shift)) & 3
                    out[128 * half + 32 * shift + 16 * part + l] = d * (sc & 15) * q - dmin * (sc >> 4)
    return out


def slow_q5_k(b: bytes) -> list[float]:
    d, dmin, sc, qh, qs = _f16(b[0:2]), _f16(b[2:4]), b[4:16], b[16:48], b[48:]
    out = []
    for sub in range(8):
        if sub < 4:
            scale, mins = sc[sub] & 63, sc[sub + 4] & 63
        else:
            scale = (sc[sub + 4] & 15) | ((sc[sub - 4] >> 6) << 4)
            mins = (sc[sub + 4] >> 4) | ((sc[sub] >> 6) << 4)
        chunk, high = divmod(sub, 2)
        for l in range(32):
            q = (qs[32 * chunk + l] >> (4 * high)) & 15 | ((qh[l] >> sub) & 1) << 4
            out.append(d * scale * q - dmin * mins)
    return out


SLOW = {"q4_k": slow_q4_k, "q6_k": slow_q6_k, "q3_k": slow_q3_k, "q2_k": slow_q2_k, "q5_k": slow_q5_k}


@pytest.mark.parametrize("name", sorted(SLOW))
def test_dequantize_f64_equals_a_slow_float64_decode(name, assert_slow_decode):
    assert_slow_decode(name, SLOW[name])
