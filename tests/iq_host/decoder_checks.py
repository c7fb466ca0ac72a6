"""Checks of mmvq_new's decoders (kernels_src/common/decoders.cuh) on the CPU through the host build
(harness.py): a decoder must give its format's own Chunk (words, scales, dw) and the same isum and isum_f on
every code word, and the warps' outputs bit for bit. Used by tests/families/test_mmvq_decoders.py (the
built-in decoders) and experiments/mmvq_tune/tests (the candidates). A decoder is named as iq_host.cpp's
DECODERS list names it: FORMAT:DECODER."""
from __future__ import annotations

import numpy as np

from strata_bench.data.synthetic import synthetic_weights
from strata_bench.formats import get_format

from . import harness

CODES = ["random", "max", "min"]


def _edge_and_random(fmt: str, seeds=(7, 8, 9)) -> np.ndarray:
    f = get_format(fmt)
    return np.concatenate([synthetic_weights(fmt, 6, f.block_size * 16, s, edge=True).reshape(-1, f.type_size)
                           for s in seeds])


def _iq2_xxs_code_blocks(rng: np.random.Generator) -> np.ndarray:
    """Every 7-bit sign index in every group (four draws each of the other groups' fields and the scale),
    and every grid byte in every position."""
    aux = []
    for g in range(4):
        for k in range(128):
            for _ in range(4):
                word = k << (7 * g)
                for h in range(g):
                    word |= int(rng.integers(0, 128)) << (7 * h)
                if g < 3:
                    word |= int(rng.integers(0, 1 << (21 - 7 * g))) << (7 * g + 7)
                aux.append(word | (int(rng.integers(0, 16)) << 28))
    n = -(-len(aux) // 8) * 8
    aux = np.array(aux + [int(x) for x in rng.integers(0, 2 ** 32, n - len(aux), dtype=np.uint64)], np.uint32)
    idx = (np.arange(4 * n, dtype=np.uint32) + rng.integers(0, 256)) % 256
    idx = (idx.reshape(n, 4) << (np.arange(4, dtype=np.uint32) * 8)).sum(axis=1, dtype=np.uint32)
    qs = np.stack([idx, aux], axis=1).astype("<u4").view(np.uint8).reshape(n // 8, 64)
    d = rng.normal(0, 0.01, size=(n // 8, 1)).astype(np.float16).view(np.uint8)
    return np.concatenate([d, qs], axis=1)


def _iq2_xs_code_blocks(rng: np.random.Generator) -> np.ndarray:
    """Every u16 entry (9-bit grid index, 7-bit sign index) at each of a chunk's four positions."""
    codes = np.arange(1 << 16, dtype=np.uint32)
    entries = np.stack([np.roll(codes, 4099 * p) for p in range(4)], axis=1).reshape(-1).astype("<u2")
    qs = entries.view(np.uint8).reshape(-1, 64)
    d = rng.normal(0, 0.01, size=(qs.shape[0], 1)).astype(np.float16).view(np.uint8)
    scales = rng.integers(0, 256, size=(qs.shape[0], 8), dtype=np.uint8)
    return np.concatenate([d, qs, scales], axis=1)


def _sign_fields(fmt: str, blocks: np.ndarray) -> set[int]:
    """The distinct sign fields of IQ3 blocks: 7-bit indexes (iq3_xxs) or sign bytes (iq3_s)."""
    if fmt == "iq3_s":
        return set(blocks[:, 2 + 64 + 8:2 + 64 + 8 + 32].ravel().tolist())  # d, qs[64], qh[8], signs[32]
    aux = blocks[:, 2 + 64:2 + 96].copy().view("<u4")  # d, qs[64], then 8 words of signs and scale
    return {int(a >> (7 * g)) & 0x7F for a in aux.ravel() for g in range(4)}


def _blocks(fmt: str) -> np.ndarray:
    """Edge and random blocks, and for the IQ2 formats blocks holding every code word."""
    rng = np.random.default_rng(11)
    coded = {"iq2_xxs": _iq2_xxs_code_blocks, "iq2_xs": _iq2_xs_code_blocks}.get(fmt)
    blocks = _edge_and_random(fmt)
    return np.concatenate([blocks, coded(rng)]) if coded else blocks


def test_the_iq3_blocks_carry_every_sign_field():
    # So every mask the sign-mask formulas can make is met by the chunk tests below.
    assert len(_sign_fields("iq3_xxs", _blocks("iq3_xxs"))) == 128
    assert len(_sign_fields("iq3_s", _blocks("iq3_s"))) == 256


def assert_same_chunks(fmt: str, decoder: str, codes: str) -> None:
    """w (signed again for a sign-mask decoder), ls0, ls1, dw, the dequantized values, isum and isum_f are
    byte-identical to the format's own decode, with random and +-127 activation codes."""
    blocks = _blocks(fmt)
    nchunks = blocks.shape[0] * get_format(fmt).block_size // 32
    q = {"random": np.random.default_rng(2).integers(-127, 128, size=(nchunks, 32)),
         "max": np.full((nchunks, 32), 127), "min": np.full((nchunks, 32), -127)}[codes].astype(np.int8)
    base = harness.run_chunks(fmt, blocks, q)
    got = harness.run_chunks(f"{fmt}:{decoder}", blocks, q)
    assert got.shape == base.shape == (nchunks,)
    for field in ("w", "ls0", "ls1", "dw", "isum", "isum_f", "v"):
        differ = np.flatnonzero((got[field].view(np.uint32) != base[field].view(np.uint32)).reshape(nchunks, -1).any(1))
        assert differ.size == 0, f"{field}: {differ.size} chunks differ, first {differ[0]}"


def assert_same_outputs(mmvq, fmt: str, decoder: str, data: str) -> None:
    """The warps' whole arithmetic on the CPU (1536 inputs: lanes 0-15 chain two chunks, 16-31 one), with
    the built-in mmvq family's inputs: the decoder's y equals the format's own bit for bit."""
    case = mmvq.case(fmt, 24, 1536, 3, data)
    host = mmvq.make_inputs(case)
    plain = harness.run_dot(fmt, host["raw"], case.cols, host["act"])
    got = harness.run_dot(f"{fmt}:{decoder}", host["raw"], case.cols, host["act"])
    assert np.array_equal(got.view(np.uint32), plain.view(np.uint32))
    assert np.abs(plain).max() > 0
