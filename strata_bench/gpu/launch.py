"""One poisoned launch: run one variant of a case on the current device over poisoned outputs, and bring
the outputs home with a mask of the elements it left unwritten.

Every output is launched twice, once over 0xFF bytes (NaN for floats) and once over 0x7E bytes (finite for
floats): an element whose bytes differ between the two launches was not written (or was written
nondeterministically, which is as bad). Checking against one poison value cannot tell an unwritten element
from one that happens to equal the poison.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import numpy as np

from strata_bench.cases import Case, Family
from strata_bench.errors import KernelFault

POISON_A = 0xFF
POISON_B = 0x7E

# cudaError names that leave the context unusable: after one of these nothing else can run in this process.
_STICKY_ERRORS = ("cudaErrorIllegalAddress", "cudaErrorLaunchFailure", "cudaErrorIllegalInstruction",
                  "cudaErrorMisalignedAddress", "cudaErrorInvalidPc", "cudaErrorHardwareStackError",
                  "cudaErrorAssert", "cudaErrorLaunchTimeout", "CUDA_ERROR_ILLEGAL_ADDRESS",
                  "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_ILLEGAL_INSTRUCTION")


@dataclass(frozen=True)
class VariantRun:
    """Host copies of one variant's outputs and which elements were left unwritten."""

    variant: str
    outputs: dict[str, np.ndarray]
    unwritten: dict[str, np.ndarray]  # bool mask per output, True where the two poisoned runs differ


def is_sticky_fault(exc: BaseException) -> bool:
    """True for a CUDA error after which the context is unusable (an illegal address, a trap, ...)."""
    text = f"{type(exc).__name__}: {exc}"
    return any(name in text for name in _STICKY_ERRORS)


def _poison(outs: Mapping[str, Any], byte: int) -> None:
    for name, arr in outs.items():
        if not arr.flags.c_contiguous:
            raise ValueError(f"output {name!r} must be a contiguous allocation (pad it, then view it)")
        arr.view("uint8").fill(byte)


def _launch_once(family: Family, case: Case, variant: str, kernels: Any, dev: Mapping[str, Any],
                 byte: int, fetch: bool = True) -> dict[str, np.ndarray]:
    import cupy

    outs = family.alloc_outputs(case, dev)
    _poison(outs, byte)
    family.launch(case, variant, kernels, dev, outs)
    cupy.cuda.runtime.deviceSynchronize()
    return {name: cupy.asnumpy(arr) for name, arr in outs.items()} if fetch else {}


def run_variant(family: Family, case: Case, variant: str, kernels: Any, dev: Mapping[str, Any]) -> VariantRun:
    """Launch one variant twice over two poisons; a CUDA fault becomes KernelFault naming the case."""
    with _fault_named(case, variant):
        first = _launch_once(family, case, variant, kernels, dev, POISON_A)
        second = _launch_once(family, case, variant, kernels, dev, POISON_B)
    unwritten = {name: _differs(first[name], second[name]) for name in first}
    return VariantRun(variant, first, unwritten)


def launch_once(family: Family, case: Case, variant: str, kernels: Any, dev: Mapping[str, Any]) -> None:
    """One launch of one variant over poisoned outputs, nothing brought home (a sanitizer's run: the tool
    watches the launch, the comparisons are parity's); a CUDA fault becomes KernelFault naming the case."""
    with _fault_named(case, variant):
        _launch_once(family, case, variant, kernels, dev, POISON_A, fetch=False)


@contextmanager
def _fault_named(case: Case, variant: str) -> Iterator[None]:
    """A sticky CUDA error (cupy's CUDARuntimeError/CUDADriverError) as KernelFault naming the case."""
    try:
        yield
    except Exception as exc:
        if is_sticky_fault(exc):
            raise KernelFault(f"kernel fault in {case.name} [{variant}]: {exc}") from exc
        raise


def _differs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per element: do the bytes differ?"""
    if a.dtype.itemsize in (1, 2, 4, 8):
        view = np.dtype(f"u{a.dtype.itemsize}")
        return a.view(view) != b.view(view)
    return (a.view(np.uint8) != b.view(np.uint8)).reshape(a.shape + (-1,)).any(axis=-1)
