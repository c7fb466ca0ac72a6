"""The bitwise diagnosis: ULP distance, and the exact line for hand-made arrays (no GPU needed); on a GPU,
a mutated copy of the new mmvq kernel (one reduction's addition order changed) must fail the bitwise
check against the old kernel, with the diagnosis: count, first and worst element, values, ULPs, hex."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from strata_bench.checks.diagnosis import as_uint, diagnose, hex_bits, ulp_distance
from strata_bench.kernels.sources import kernels_dir
from strata_bench.gpu.devices import probe

f32, f16 = np.float32, np.float16


def test_ulp_distance_counts_representable_steps_across_zero():
    a = np.array([1.0, 0.0, -0.0, 1e-45], dtype=np.float32)
    b = np.array([np.nextafter(np.float32(1), np.float32(2)), -0.0, np.float32(-1e-45), -1e-45], dtype=np.float32)
    assert ulp_distance(a, b).tolist() == [1, 0, 1, 2]


def test_hex_is_most_significant_byte_first_and_as_uint_keeps_the_bits():
    assert hex_bits(f32(2.0)) == "0x40000000" and hex_bits(f16(-0.0)) == "0x8000" and hex_bits(np.int8(-2)) == "0xfe"
    assert as_uint(np.array([-0.0], f32)).tolist() == [0x80000000]


def test_diagnose_names_the_count_the_first_and_the_worst_exactly(toy_family, toy_case):
    base = np.zeros((2, 8), f32)
    other = base.copy()
    other[0, 3] = f32(1e-7)
    other[1, 5] = f32(2.0)
    assert diagnose(toy_family, toy_case, "y", base, other, "old", "new") == (
        f"y: 2 of 16 elements differ; "
        f"first at row 3, column 0: old={f32(0)!r} (0x00000000) new={f32(1e-7)!r} (0x33d6bf95), 869711765 ulp; "
        f"worst at row 5, column 1: old={f32(0)!r} (0x00000000) new={f32(2)!r} (0x40000000), 1073741824 ulp")


def test_diagnose_takes_a_nan_as_the_worst_difference(toy_family, toy_case):
    base = np.array([[1.0, 2.0, np.nan, 4.0]], f32)
    other = np.array([[1.0, np.nextafter(f32(2), f32(3)), 3.0, -4.0]], f32)
    assert diagnose(toy_family, toy_case, "y", base, other, "old", "new") == (
        f"y: 3 of 4 elements differ; "
        f"first at row 1, column 0: old={f32(2)!r} (0x40000000) new={np.nextafter(f32(2), f32(3))!r} (0x40000001), "
        f"1 ulp; worst at row 2, column 0: old={f32(np.nan)!r} (0x7fc00000) new={f32(3)!r} (0x40400000), 1065353216 ulp")


def test_diagnose_integer_and_signed_zero_outputs(toy_family, toy_case):
    text = diagnose(toy_family, toy_case, "q", np.array([1, 2, 3], np.int8), np.array([1, -2, 3], np.int8), "old", "new")
    where = f"row 1, column 1: old={np.int8(2)!r} (0x02) new={np.int8(-2)!r} (0xfe), 4 ulp"
    assert text == f"q: 1 of 3 elements differ; first at {where}; worst at {where}"
    # -0 and +0 differ in their bits, so the bitwise check fails, though they are 0 ulp apart.
    text = diagnose(toy_family, toy_case, "h", np.array([1.0, -0.0], f16), np.array([1.0, 0.0], f16), "1-col", "4-col")
    where = f"row 1, column 1: 1-col={f16(-0.0)!r} (0x8000) 4-col={f16(0.0)!r} (0x0000), 0 ulp"
    assert text == f"h: 1 of 2 elements differ; first at {where}; worst at {where}"


def test_diagnose_integer_outputs(toy_family, toy_case):
    a = np.array([1, 2, 3], np.int8)
    b = np.array([1, -2, 3], np.int8)
    text = diagnose(toy_family, toy_case, "q", a, b, "old", "new")
    assert "1 of 3 elements differ" in text and "0xfe" in text



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
