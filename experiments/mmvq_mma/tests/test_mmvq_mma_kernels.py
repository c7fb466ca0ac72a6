"""This experiment's kernels (kernels/): the fragment decoders of iq2_xxs and iq1_s run through mmvq_mma's
schedule on the CPU (tests/iq_host/mma_emul.h built with kernels/mma_frag_grid.cuh) must give the one warp
per row's y bit for bit, as tests/families/test_mmvq_mma.py checks the built-in formats; and every kernel the
mma variants name compiles from kernels/mmvq_mma_exp.cu without spills, on the tensor cores, the staged
ones with cp.async."""
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

from tests.cases_file import load_cases_file
from tests.families.test_mmvq_mma import SHAPES, _both, _whole_blocks

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))
from iq_host import harness  # noqa: E402

# Every test here builds: the host emulation's C++ harness (about 6 s), or the kernels with NVRTC.
pytestmark = pytest.mark.slow

SCRIPT = load_cases_file("experiments/mmvq_mma/cases.py")
FORMATS = ("iq2_xxs", "iq1_s")  # the formats whose MmaFrag is this experiment's
HOST = dict(headers=(str(SCRIPT.KERNELS / "mma_frag_grid.cuh"),),
            # mma_emul.h's built-in names, run with this experiment's per-lane decoders, not the product's pairs
            defines=("MMA_EMUL_IQ1_S=fmt_iq1_s", "MMA_EMUL_IQ2_XXS=fmt_iq2_xxs"))


@pytest.mark.parametrize("fmt,rows,cols,ncols,data", [
    (fmt, rows, _whole_blocks(fmt, cols), ncols, data) for rows, cols, ncols, data in SHAPES for fmt in FORMATS])
def test_mma_schedule_equals_one_warp_per_row_bitwise(fmt, rows, cols, ncols, data):
    old, mma = _both(fmt, rows, cols, ncols, data, build=harness.binary(**HOST))
    assert old.shape == mma.shape == (ncols, rows)
    assert np.array_equal(old.view(np.uint32), mma.view(np.uint32)), \
        f"{int((old.view(np.uint32) != mma.view(np.uint32)).sum())} of {old.size} outputs differ"


def test_the_host_build_with_this_experiments_header_names_its_formats(tmp_path):
    proc = subprocess.run([str(harness.binary(**HOST)), "dot_mma", "q2_0", "1", "256", "/dev/null", "/dev/null",
                           "1", str(tmp_path / "y.bin")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "(iq4_nl, q8_0, iq4_xs, iq1_s, iq2_xxs, iq1_m, iq2_xs, iq2_s, iq3_xxs, iq3_s)" in proc.stderr


def _kernels() -> list[str]:
    """The kernels only this experiment compiles (the built-in ones: tests/families/test_mmvq_mma.py)."""
    return SCRIPT.MmvqMma().name_expressions(SCRIPT.OWN_SOURCE)


@functools.lru_cache(maxsize=None)
def _built(arch: str):
    """The mma variants' kernels compiled once per architecture from this experiment's source."""
    from strata_bench.kernels.build import compile_source

    return compile_source(SCRIPT.OWN_SOURCE, _kernels(), arch, root=SCRIPT.KERNELS)


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_mma_kernels_compile_without_spills(arch):
    built = _built(arch)
    assert set(built.lowered) == set(_kernels()) and len(_kernels()) == 4
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", built.log)
    assert len(spills) >= len(_kernels()) and all(s == ("0", "0") for s in spills), built.log


CUOBJDUMP = shutil.which(os.environ.get("CUOBJDUMP", "cuobjdump"))


@pytest.mark.nvrtc
@pytest.mark.skipif(CUOBJDUMP is None, reason="no cuobjdump (set CUOBJDUMP=path): the tensor-core SASS is not read")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_mma_kernels_use_the_tensor_cores_and_the_stages_cp_async(arch):
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(_built(arch).cubin)
        f.flush()
        sass = subprocess.run([CUOBJDUMP, "--dump-sass", f.name], capture_output=True, text=True, check=True).stdout
    assert sass.count("IMMA.16832.S8.S8") >= 8 * len(_kernels())  # 8 per kernel at least (a whole group unrolled)
    assert sass.count("LDGSTS") > 0  # the cp.async stages (S >= 2) copy without registers
