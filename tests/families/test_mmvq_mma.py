"""mmvq_mma's schedule (kernels_src/mmvq/mmvq_mma.cu) on the CPU: tiles of 16 rows x 8 columns, chunk
integers from an emulated m16n8k32 mma fed by the kernel's fragment mapping, the 32 virtual lanes split
over 4 warps and combined by warp_sum_f32's tree across them (tests/iq_host/mma_emul.h). Its y must equal,
bit for bit, the dot mode's (one warp per row: mmvq_old's arithmetic). iq1_s and iq2_xxs run with their lane-pair
decoders (fmt_iq1_s_pair, fmt_iq2_xxs_pair, mma_frag.cuh: on the host the partner lane's selector is computed from
the same block, what the shuffle delivers), iq1_m, iq2_xs and iq2_s with the split lane pair (fmt_*_k16pair,
mma_frag_split.cuh: two k16 mmas a chunk, one per 16-value scale), iq3_xxs and iq3_s per lane; a partner other than
t ^ 1, ls1 read from ls0's bits, or iq3's sign nibble of the other half fails the fragment check. The decoders and
stages `new` does not run (per-lane iq2_xxs, iq1_s and split formats, cp.async stages) are experiments/mmvq_mma's
and experiments/mmvq_mma5's, tested there the same way."""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from strata_bench.families import load_builtin_families

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from iq_host import harness

FAMILY = load_builtin_families()["mmvq"]
SPLIT = ("iq1_m", "iq2_xs", "iq2_s")  # a scale per 16 values: the split lane pair (MmaConfig.frag "k16pair")
IQ3 = ("iq3_xxs", "iq3_s")  # per-lane MmaFrag
# the formats mmvq_mma has an MmaFrag for in kernels_src
FORMATS = ("iq4_nl", "q8_0", "iq4_xs", "iq1_s", "iq2_xxs", *SPLIT, *IQ3)
# 256-value blocks: a group is one block, at a head of 0-14 bytes
SUPER = ("iq4_xs", "iq2_xxs", "iq1_s", *SPLIT, *IQ3)
MMA_KERNELS = [  # the built-in family's (mmvq_mma.MMA_CONFIGS)
    "mmvq_mma<siq::fmt_iq4_nl, 4, 1, 1>", "mmvq_mma<siq::fmt_q8_0, 3, 1, 1>", "mmvq_mma<siq::fmt_iq4_xs, 4, 1, 1>",
    "mmvq_mma<siq::fmt_iq1_s_pair, 4, 1, 1>", "mmvq_mma<siq::fmt_iq2_xxs_pair, 4, 1, 1>",
    *(f"mmvq_mma<siq::fmt_{f}_k16pair, 4, 1, 1>" for f in SPLIT), *(f"mmvq_mma<siq::fmt_{f}, 4, 1, 1>" for f in IQ3),
]
PAIRS = ("iq1_s", "iq2_xxs", *SPLIT)  # the lane-pair decoders (MmaConfig.frag "pair" and "k16pair")


def _both(fmt: str, rows: int, cols: int, ncols: int, data: str, build=None) -> tuple[np.ndarray, np.ndarray]:
    """y of the dot mode and of the dot_mma mode; `build`: a host binary with an experiment's headers."""
    host = FAMILY.make_inputs(FAMILY.case(fmt, rows, cols, ncols, data))
    old = harness.run_dot(fmt, host["raw"], cols, host["act"], build=build)
    mma = harness.run_dot(fmt, host["raw"], cols, host["act"], mode="dot_mma", build=build)
    return old, mma


SHAPES = [
    (40, 1536, 8, "seed:7"),    # 48 chunks: virtual lanes 0-15 chain two chunks, 16-31 one; 40 rows: a part tile
    (24, 544, 8, "seed:3"),     # 17 chunks: warp 0 full, warp 1 one chunk, warps 2-3 none (acc 0.0f, as old);
                                # the 256-value formats take 768 (3 blocks: warps 0-2 one group each, warp 3 none)
    (24, 4352, 8, "seed:3"),    # 17 blocks of 256: warp 0 has 5 groups, the others 4; every head of iq2_xxs, iq1_s
    (33, 512, 8, "seed:4"),     # 2 blocks of 256: warps 2-3 none; row bytes not a multiple of 16 (padded stride)
    (16, 8192, 8, "seed:1"),    # the DRAM shape's K: 8 chunks per virtual lane
    (512, 2560, 8, "edge:2"),   # edge blocks (extreme codes and scales)
    (19, 1024, 3, "seed:5"),    # 3 columns: a tile with 5 missing columns, 3 rows in the last tile
]


def _whole_blocks(fmt: str, cols: int) -> int:
    """cols rounded up to whole blocks of the format (256 values for SUPER, 32 for the others)."""
    block = 256 if fmt in SUPER else 32
    return -(-cols // block) * block


@pytest.mark.parametrize("fmt,rows,cols,ncols,data", [
    (fmt, rows, _whole_blocks(fmt, cols), ncols, data) for rows, cols, ncols, data in SHAPES for fmt in FORMATS])
def test_mma_schedule_equals_one_warp_per_row_bitwise(fmt, rows, cols, ncols, data):
    old, mma = _both(fmt, rows, cols, ncols, data)
    assert old.shape == mma.shape == (ncols, rows)
    assert np.array_equal(old.view(np.uint32), mma.view(np.uint32)), \
        f"{int((old.view(np.uint32) != mma.view(np.uint32)).sum())} of {old.size} outputs differ"


def test_dot_mma_refuses_formats_it_has_no_schedule_for(tmp_path):
    """q2_0: no MmaFrag (new runs its 8-column passes on mmvq_new)."""
    proc = subprocess.run([str(harness.binary()), "dot_mma", "q2_0", "1", "256", "/dev/null", "/dev/null", "1",
                           str(tmp_path / "y.bin")], capture_output=True, text=True)
    assert proc.returncode == 2 and "no mma schedule" in proc.stderr
    assert f"({', '.join(('iq4_nl', 'q8_0', 'iq4_xs', 'iq1_s', 'iq2_xxs', *SPLIT, *IQ3))})" in proc.stderr


@pytest.mark.slow  # host emulation: a harness build per partner lane (6-7 s each)
@pytest.mark.parametrize("fmt", PAIRS)
@pytest.mark.parametrize("xor", [2, 3])
def test_a_lane_pair_with_a_wrong_partner_lane_fails_the_fragment_check(fmt, xor):
    """The lane pair's exchange with lane t ^ 2 or t ^ 3 (the other row half's group, or the wrong one) gives words
    decode() does not: dot_mma stops with exit 3 at the first lane whose fragment differs."""
    with pytest.raises(subprocess.CalledProcessError) as err:
        _both(fmt, 40, 1536, 8, "seed:7", build=harness.binary(defines=(f"LANEPAIR_XOR={xor}",)))
    assert err.value.returncode == 3


@pytest.mark.slow  # host emulation: a harness build per planted defect (6-7 s each)
@pytest.mark.parametrize("fmt,defect", [*((f, "LS1") for f in SPLIT), *((f, "SIGN_HALF") for f in IQ3)])
def test_a_planted_decoder_defect_fails_the_fragment_check(fmt, defect):
    """ls1 read from ls0's bits (the split tags' second scale, as a one-scale decode would), or every iq3 lane's sign
    nibble from the other half of its sign byte: words or scales decode() does not give, exit 3."""
    with pytest.raises(subprocess.CalledProcessError) as err:
        _both(fmt, 40, 1536, 8, "seed:7", build=harness.binary(defines=(f"MMA_DEFECT_{defect}=1",)))
    assert err.value.returncode == 3


@functools.lru_cache(maxsize=None)
def _built(arch: str):
    """mmvq_mma.cu's kernels compiled once per architecture for the tests below."""
    from strata_bench.kernels.build import compile_source

    return compile_source("mmvq/mmvq_mma.cu", MMA_KERNELS, arch)


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_mma_kernels_compile_without_spills(arch):
    built = _built(arch)
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", built.log)
    assert len(spills) == len(MMA_KERNELS) and all(s == ("0", "0") for s in spills), built.log


# SASS needs cuobjdump (CUOBJDUMP=path, as scripts/sass_loops.py); without it this skips, saying so.
CUOBJDUMP = shutil.which(os.environ.get("CUOBJDUMP", "cuobjdump"))


@pytest.mark.nvrtc
@pytest.mark.skipif(CUOBJDUMP is None, reason="no cuobjdump (set CUOBJDUMP=path): the tensor-core SASS is not read")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_mma_kernels_use_the_tensor_cores(arch):
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(_built(arch).cubin)
        f.flush()
        sass = subprocess.run([CUOBJDUMP, "--dump-sass", f.name], capture_output=True, text=True, check=True).stdout
    assert sass.count("LDGSTS") == 0  # S = 1: the groups pass through registers (cp.async is the experiment's)
    functions = {fn.split()[0]: fn for fn in sass.split("Function : ")[1:]}
    by_name = {k: functions[v] for k, v in _built(arch).lowered.items()}
    for name, fn in by_name.items():
        # a whole group unrolled: 8 m16n8k32 a group, or for a split tag 16 m16n8k16 (two a chunk) and no m16n8k32
        k16 = "_k16pair" in name
        assert fn.count("IMMA.16832.S8.S8") >= (0 if k16 else 8) and fn.count("IMMA.16816.S8.S8") >= (16 if k16 else 0)
        assert (fn.count("IMMA.16832.S8.S8") == 0) == k16 == (fn.count("IMMA.16816.S8.S8") > 0), name
    # the lane pairs exchange their selectors by shuffle; no other kernel shuffles (tile_tree goes through shared
    # memory; experiments/mmvq_lanepair's controls, the same decoder without the exchange, have none either)
    shfl = {k: fn.count("SHFL.BFLY") for k, fn in by_name.items()}
    pairs = [shfl.pop(f"mmvq_mma<siq::fmt_{fmt}_{'k16pair' if fmt in SPLIT else 'pair'}, 4, 1, 1>") for fmt in PAIRS]
    assert min(pairs) > 0 and set(shfl.values()) == {0}, shfl

