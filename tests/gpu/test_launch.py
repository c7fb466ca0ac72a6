"""One poisoned launch without a GPU (host arrays stand in for device ones): the two poisons, the
unwritten mask, and which CUDA errors become a KernelFault."""
from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest

from strata_bench.cases import Case, Family
from strata_bench.errors import KernelFault
from strata_bench.gpu.launch import POISON_A, POISON_B, _differs, _poison, is_sticky_fault, run_variant

CASE = Case("toy", "q8_0", rows=1, cols=32)


class _Half(Family):
    """Writes the first half of its output; raises `error` instead when given one."""

    def __init__(self, error=None):
        self.error, self.poisons = error, []

    def default_cases(self): return []
    def name_expressions(self, source): return []
    def make_inputs(self, case): return {}
    def to_device(self, case, host): return {}
    def reference(self, case, host): return []
    def alloc_outputs(self, case, dev): return {"y": np.zeros(4, np.float32)}

    def launch(self, case, variant, kernels, dev, outs, stream=None):
        if self.error is not None:
            raise self.error
        self.poisons.append(int(outs["y"].view(np.uint8)[-1]))
        outs["y"][:2] = 3.0


@pytest.fixture
def host_cupy(monkeypatch):
    runtime = SimpleNamespace(deviceSynchronize=lambda: None)
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(asnumpy=np.array, cuda=SimpleNamespace(runtime=runtime)))


def test_a_variant_runs_over_both_poisons_and_its_unwritten_elements_are_masked(host_cupy):
    family = _Half()
    run = run_variant(family, CASE, "new", None, {})
    assert family.poisons == [POISON_A, POISON_B] == [0xFF, 0x7E]
    assert run.variant == "new" and run.outputs["y"][:2].tolist() == [3.0, 3.0]
    assert np.isnan(run.outputs["y"][2:]).all()  # the first launch's 0xFF bytes: NaN
    assert run.unwritten["y"].tolist() == [False, False, True, True]


def test_a_sticky_cuda_error_becomes_a_kernel_fault_naming_the_case(host_cupy):
    sticky = RuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")
    with pytest.raises(KernelFault, match=r"^kernel fault in toy/q8_0/1x32/n1/seed:1 \[new\]: cudaErrorIllegal"):
        run_variant(_Half(sticky), CASE, "new", None, {})
    with pytest.raises(ValueError, match="bad grid"):  # anything else is not a fault and propagates as it is
        run_variant(_Half(ValueError("bad grid")), CASE, "new", None, {})


def test_sticky_faults_are_the_errors_that_leave_the_context_unusable():
    assert is_sticky_fault(RuntimeError("CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure"))
    assert not is_sticky_fault(RuntimeError("cudaErrorMemoryAllocation: out of memory"))


def test_poison_fills_every_byte_and_refuses_a_strided_output():
    arr = np.zeros(3, np.float32)
    _poison({"y": arr}, 0x7E)
    assert arr.view(np.uint8).tolist() == [0x7E] * 12
    with pytest.raises(ValueError, match="output 'y' must be a contiguous allocation"):
        _poison({"y": np.zeros((4, 4), np.float32)[:, 1]}, 0xFF)


def test_unwritten_mask_compares_bytes_per_element():
    a = np.array([1.0, np.nan, -0.0], np.float32)
    b = np.array([1.0, np.nan, 0.0], np.float32)
    assert _differs(a, b).tolist() == [False, False, True]  # equal NaN bytes are equal; -0 and 0 are not
    wide = np.zeros(2, dtype="V3")
    other = wide.copy()
    other.view(np.uint8)[4] = 1
    assert _differs(wide, other).tolist() == [False, True]
