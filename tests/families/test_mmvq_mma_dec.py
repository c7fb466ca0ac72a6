"""mmvq_mma_dec's schedule (kernels_src/mmvq/mmvq_mma_dec.cu) on the CPU, for every format: each format's own
decode left in an emulated warp tile at the kernel's offsets, the A fragments read back as ldmatrix.x4 gives
them, one m16n8k32 (one scale) or two m16n8k16 (two scales) per chunk, the 32 virtual lanes split over 4
warps and combined by warp_sum_f32's tree (tests/iq_host/mma_dec_emul.h). Its y must equal, bit for bit,
the dot mode's (one warp per row: mmvq_old's arithmetic)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from strata_bench.families import load_builtin_families

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from iq_host import harness  # noqa: E402

FAMILY = load_builtin_families()["mmvq"]
FORMATS = ("iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_nl", "iq4_xs", "q2_0", "q8_0")


def _cols(fmt: str, cols: int) -> int:
    """cols rounded up to whole blocks: 544 -> 576 (18 chunks, a partial group) for q2_0, 768 (24 chunks,
    warp 3 without a chunk) for the 256-value formats."""
    from strata_bench.formats import get_format

    block = get_format(fmt).block_size
    return -(-cols // block) * block


def _both(fmt: str, rows: int, cols: int, ncols: int, data: str) -> tuple[np.ndarray, np.ndarray]:
    host = FAMILY.make_inputs(FAMILY.case(fmt, rows, cols, ncols, data))
    old = harness.run_dot(fmt, host["raw"], cols, host["act"])
    dec = harness.run_dot(fmt, host["raw"], cols, host["act"], mode="dot_mma_dec")
    return old, dec


SHAPES = [
    (40, 1536, 8, "seed:7"),    # 48 chunks: virtual lanes 0-15 chain two chunks, 16-31 one; 40 rows: a part tile
    (24, 544, 8, "seed:3"),     # 17 chunks (q8_0, q2_0, iq4_nl): a partial last group, warps 2-3 without chunks
    (16, 8192, 8, "seed:1"),    # the DRAM shape's K: 8 chunks per virtual lane
    (512, 2560, 8, "edge:2"),   # edge blocks (extreme codes and scales; EDGE_SHAPE, where they all sit)
    (19, 1024, 3, "seed:5"),    # 3 columns: a tile with 5 missing columns, 3 rows in the last tile
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("rows,cols,ncols,data", SHAPES)
def test_mma_dec_schedule_equals_one_warp_per_row_bitwise(fmt, rows, cols, ncols, data):
    cols = _cols(fmt, cols)
    old, dec = _both(fmt, rows, cols, ncols, data)
    assert old.shape == dec.shape == (ncols, rows)
    assert np.array_equal(old.view(np.uint32), dec.view(np.uint32)), \
        f"{int((old.view(np.uint32) != dec.view(np.uint32)).sum())} of {old.size} outputs differ"


def test_two_scale_formats_have_different_half_scales_in_the_test_data():
    """The two-k16 form is only tested if ls0 != ls1 somewhere (else a swap would pass)."""
    from strata_bench.formats import get_format

    for fmt in ("iq2_xs", "iq2_s", "iq1_m"):
        host = FAMILY.make_inputs(FAMILY.case(fmt, 16, 512, 1, "seed:7"))
        blocks = np.ascontiguousarray(host["raw"]).reshape(-1, get_format(fmt).type_size)
        q = np.zeros((blocks.shape[0] * 8, 32), np.int8)
        rec = harness.run_chunks(fmt, blocks, q)
        assert (rec["ls0"] != rec["ls1"]).any(), fmt


def test_dot_mma_dec_refuses_unknown_formats(tmp_path):
    proc = subprocess.run([str(harness.binary()), "dot_mma_dec", "f16", "1", "256", "/dev/null", "/dev/null", "1",
                           str(tmp_path / "y.bin")], capture_output=True, text=True)
    assert proc.returncode == 2 and "unknown format" in proc.stderr


@pytest.mark.nvrtc
def test_mma_dec_kernels_compile_without_spills_and_use_both_mma_shapes():
    from strata_bench.kernels.build import compile_source

    kernels = [f"mmvq_mma_dec<siq::fmt_{f}, 4, 1, {pf}>" for f in ("iq2_xxs", "iq2_s") for pf in (0, 1)]
    built = compile_source("mmvq/mmvq_mma_dec.cu", kernels, "sm_90")
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", built.log)
    assert len(spills) == 4 and all(s == ("0", "0") for s in spills), built.log
