"""A mutated copy of the new mmvq kernel (one reduction's addition order changed) must fail the bitwise
check against the old kernel, with the diagnosis: count, first and worst element, values, ULPs, hex."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from strata_bench.runner.devices import probe
from strata_bench.kernels.sources import kernels_dir

ORIGINAL = "warp_sum_f32(acc[r][col])"  # the new kernel's per-column butterfly
MUTANT = "warp_sum_f32_mutant(acc[r][col])"
# The same 31 additions as warp_sum_f32, in the opposite xor order (1, 2, 4, 8, 16): only the order changes.
MUTANT_DEF = """
__device__ __forceinline__ float warp_sum_f32_mutant(float v) {
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}
"""


def mutate(text: str) -> str:
    assert text.count(ORIGINAL) == 1, "the new kernel's reduction moved: update the mutation point"
    last_include = list(re.finditer(r"^#include .*$", text, flags=re.M))[-1]
    text = text[:last_include.end()] + "\n" + MUTANT_DEF + text[last_include.end():]
    return text.replace(ORIGINAL, MUTANT)


def test_mutation_changes_only_the_new_kernel():
    text = (kernels_dir() / "mmvq" / "mmvq.cu").read_text()
    mutated = mutate(text)
    assert mutated.count(MUTANT) == 1 and ORIGINAL not in mutated


@pytest.mark.gpu
@pytest.mark.skipif(not probe().usable, reason=f"needs a usable CUDA GPU ({probe().reason})")
def test_mutated_new_kernel_fails_bitwise_with_diagnosis(tmp_path):
    copy = tmp_path / "kernels_src"
    shutil.copytree(kernels_dir(), copy)
    target = copy / "mmvq" / "mmvq.cu"
    target.write_text(mutate(target.read_text()))
    env = {**__import__("os").environ, "STRATA_KERNELS_SRC": str(copy), "STRATA_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "strata_bench", "parity", "--family", "mmvq", "--format", "iq2_xxs",
         "-k", "8192x2560/n4/seed", "--results", str(tmp_path / "results"), "-q"],
        capture_output=True, text=True, timeout=300, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "BITWISE" in out
    for needle in ("elements differ", "first at", "worst at", "ulp", "old=", "new=", "(0x"):
        assert needle in out, f"diagnosis lacks {needle!r}:\n{out}"
