"""The one-column passes of mmvq's `new` that run mmvq_onecol (kernels_src/mmvq/mmvq_onecol.cu: mmvq_new's
one-column schedule with its own loop and decoders, kernels_src/mmvq/onecol_dec.cuh; the same bits as mmvq_old by
the contract in its header): a one-column pass of a format listed in ONECOL_CONFIGS with at least `min_rows` rows;
every other pass keeps its launch (mmvq_new, mmvq_old or mmvq_mma as before). min_rows is the one shape the kernels
were measured at (docs/PERF_NOTES.md v13, 131072 x 8192): below it nothing says they are faster.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from strata_bench.kit import allow_dynamic_shared, ceil_div, resident_blocks, row_stride
from strata_bench.kernels.constants import MMVQ_NEW_WARPS as WARPS

ONECOL_SOURCE = "mmvq/mmvq_onecol.cu"
CODE_BYTES = 32  # staged per activation block: its 32 codes (in the decoder's order: ActPairs), then the scale


@dataclass(frozen=True)
class OneColConfig:
    """How one format's one-column passes run mmvq_onecol<D, R, MINB, U>: the decoder D (`name`, the C++ type
    `expression` of onecol_dec.cuh, the words of the static shared tables it stages, whether it stages each
    activation block's code sum beside the scale), R rows a warp, MINB blocks an SM (__launch_bounds__), the
    step loop's unroll U, and the smallest row count it runs at. None of them touches the arithmetic
    (mmvq_onecol.cu's contract): every launch gives old's bits."""

    name: str
    expression: str
    shared_words: int
    code_sum: bool
    rows: int
    min_blocks: int
    unroll: int
    min_rows: int

    @property
    def kernel(self) -> str:
        return f"mmvq_onecol<{self.expression}, {self.rows}, {self.min_blocks}, {self.unroll}>"

    @property
    def label(self) -> str:
        return f"onecol-{self.name} r{self.rows}m{self.min_blocks}u{self.unroll}"

    def dynamic_bytes(self, nchunks: int) -> int:
        """The staged activations (stage_onecol_acts): per block its codes, the scale times D_ACT_SCALE (4 bytes),
        and with the code sum 4 bytes more (one 8-byte load)."""
        return nchunks * (CODE_BYTES + (8 if self.code_sum else 4))

    @property
    def static_bytes(self) -> int:
        return 4 * self.shared_words

    def applies(self, rows: int) -> bool:
        return rows >= self.min_rows


# Measured on an H100 80GB HBM3 (one column, 131072 x 8192, cold, us per call incl. the q8_1 kernel; PERF_NOTES v13,
# experiments/mmvq_onecol's onecol-m, bitwise old in its 28 parity cases): iq2_xxs mul7 r2m4u4 120.02 against
# new's mmvq_new (lean r2m4u8) 137.17, iq1_s tern r4m3u4 107.65 against 111.13; at that shape only, hence min_rows
# 131072. Tables: iq2_xxs the grid's 256 words restaged for mul7 and 32 copies of its PRMT source A; iq1_s 2048 u16
# selectors (1024 words) and 32 copies each of A_LO and A_HI; tern stages the code sum. iq1_m's selector table
# (onecol_dec_iq1m.cuh, experiments/mmvq_onecol1m, PERF_NOTES v18; H100, the same shape: s32 r4m3u4 114.09 against
# new's mmvq_new r2m3u8 137.66, bitwise old in its 20 parity cases): 4096 selector words (the 11-bit index and the
# delta bit) and 32 copies each of K0 and K1.
ONECOL_CONFIGS: dict[str, OneColConfig] = {
    "iq2_xxs": OneColConfig("mul7", "onecol::Iq2xxsMul7", 256 + 32, False, rows=2, min_blocks=4, unroll=4,
                            min_rows=131072),
    "iq1_s": OneColConfig("tern", "onecol::Iq1sTern", 1024 + 64, True, rows=4, min_blocks=3, unroll=4,
                          min_rows=131072),
    "iq1_m": OneColConfig("sel32", "onecol::Iq1mSel<false>", 4096 + 64, False, rows=4, min_blocks=3, unroll=4,
                          min_rows=131072),
}


def onecol_config(fmt: str, nc: int, rows: int) -> OneColConfig | None:
    """The mmvq_onecol launch of a pass of nc columns over `rows` rows, or None where it keeps its launch."""
    config = ONECOL_CONFIGS.get(fmt)
    if nc != 1 or config is None or not config.applies(rows):
        return None
    return config


def onecol_kernels(source: str) -> list[str]:
    return [config.kernel for config in ONECOL_CONFIGS.values()] if source == ONECOL_SOURCE else []


def launch_onecol_pass(config: Any, fmt: str, rows: int, cols: int, kernels: Any, dev: Mapping[str, Any],
                       outs: Mapping[str, Any], col0: int, stream: Any) -> None:
    """mmvq_onecol over column col0 as `config` says (a OneColConfig, or an experiment's launch with the same
    kernel, rows, dynamic_bytes and static_bytes), on mmvq_new's grid: min(row groups, resident blocks)."""
    nchunks = cols // 32
    fn = kernels.get(config.kernel)
    shared = config.dynamic_bytes(nchunks)
    allow_dynamic_shared(fn, shared, static_bytes=config.static_bytes)
    grid = (min(ceil_div(rows, WARPS * config.rows), resident_blocks(fn, 32 * WARPS, shared)),)
    args = (dev["w"], np.int64(row_stride(fmt, cols)), np.int32(rows), np.int32(nchunks),
            dev["xq"][col0:col0 + 1], outs["y"][col0:col0 + 1], np.int32(rows))
    fn(grid, (32 * WARPS,), args, shared_mem=shared, stream=stream)
