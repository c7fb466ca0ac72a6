"""I-quants: exact float64 values against slow decoders of the layouts."""
from __future__ import annotations

import struct

import gguf
import numpy as np
import pytest


def _f16(raw: bytes) -> float:
    return float(np.frombuffer(raw, dtype=np.float16)[0])


def _grid(cls) -> np.ndarray:
    cls.init_grid()
    return cls.grid.reshape(-1, cls.grid_shape[1]).astype(np.float64)


# --- slow decoders: one element at a time, from the block layouts / ggml's C loops ----------------
def slow_iq4_xs(b: bytes) -> list[float]:
    kvalues = gguf.quants.IQ4_NL.kvalues
    d, scales_h, scales_l, qs = _f16(b[0:2]), b[2] | b[3] << 8, b[4:8], b[8:]
    out = []
    for ib in range(8):
        ls = (scales_l[ib // 2] >> (4 * (ib % 2)) & 15) | ((scales_h >> (2 * ib) & 3) << 4)
        for j in range(32):
            byte = qs[16 * ib + j % 16]
            out.append(d * (ls - 32) * kvalues[(byte >> (4 * (j // 16))) & 15])
    return out


def slow_iq1_m(b: bytes) -> list[float]:
    grid, delta = _grid(gguf.quants.IQ1_S), 0.125
    qs, qh = b[0:32], b[32:48]
    sc = struct.unpack("<4H", b[48:56])
    d = float(np.uint16((sc[0] >> 12) | (sc[1] >> 8 & 0xF0) | (sc[2] >> 4 & 0xF00) | (sc[3] & 0xF000))
              .view(np.float16))
    out = []
    for ib in range(8):
        for group in range(4):
            h = qh[2 * ib + group // 2] >> (4 * (group % 2))
            index = qs[4 * ib + group] | ((h & 7) << 8)
            sign = -delta if h & 8 else delta
            ls = sc[ib // 2] >> (6 * (ib % 2) + 3 * (group // 2)) & 7
            out.extend(d * (2 * ls + 1) * (g + sign) for g in grid[index])
    return out


def slow_iq2_xxs(b: bytes) -> list[float]:
    grid, ksigns = _grid(gguf.quants.IQ2_XXS), gguf.quants.IQ2_XXS.ksigns
    d = _f16(b[0:2])
    out = []
    for ib in range(8):
        indexes = b[2 + 8 * ib: 6 + 8 * ib]
        aux = struct.unpack("<I", b[6 + 8 * ib: 10 + 8 * ib])[0]
        db = d * (0.5 + (aux >> 28)) * 0.25
        for l in range(4):
            signs = ksigns[(aux >> (7 * l)) & 127]
            out.extend(db * g * (-1 if signs >> j & 1 else 1) for j, g in enumerate(grid[indexes[l]]))
    return out


SLOW = {"iq4_xs": slow_iq4_xs, "iq1_m": slow_iq1_m, "iq2_xxs": slow_iq2_xxs}


@pytest.mark.parametrize("name", sorted(SLOW))
def test_dequantize_f64_equals_a_slow_float64_decode(name, assert_slow_decode):
    assert_slow_decode(name, SLOW[name])
