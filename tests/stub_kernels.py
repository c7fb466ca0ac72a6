"""Kernels without a GPU, for tests of a family's launch path: `get(name)` returns a callable that records
each launch as (name, grid, block, args, shared_mem) in `calls`; `stub_launch_helpers` replaces the
device queries (shared-memory opt-in, occupancy, compute capability, the opt-in limit) in the given modules."""
from __future__ import annotations

from types import ModuleType
from typing import Any


class RecordingKernels:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, Any, Any, int]] = []

    def get(self, name: str):
        calls = self.calls

        class Kernel:
            ptr = hash(name)

            def __call__(self, grid, block, args, shared_mem=0, stream=None):
                calls.append((name, grid, block, args, shared_mem))
        return Kernel()

    @property
    def names(self) -> list[str]:
        return [c[0] for c in self.calls]


H200_SHARED_OPTIN = 227 * 1024  # sharedMemPerBlockOptin of sm_90
A100_SHARED_OPTIN = 163 * 1024  # of sm_80


def stub_launch_helpers(monkeypatch, *modules: ModuleType, resident: int = 132, major: int = 9,
                        optin: int = H200_SHARED_OPTIN) -> None:
    """Each module's allow_dynamic_shared, resident_blocks, compute_major and shared_optin, where it has
    them (an H200 by default)."""
    stubs = {"allow_dynamic_shared": lambda fn, n, static_bytes=0: None,
             "resident_blocks": lambda fn, threads, shared: resident,
             "compute_major": lambda: major,
             "shared_optin": lambda: optin}
    for module in modules:
        for name, stub in stubs.items():
            if hasattr(module, name):
                monkeypatch.setattr(module, name, stub)


def mmvq_launches(fam, case, variants) -> dict[str, list[str]]:
    """The kernels each of `variants` of an mmvq family launches for `case`, on zero inputs of its shape (the
    stubs of stub_launch_helpers in place)."""
    import numpy as np

    nchunks = case.cols // 32
    dev = {"w": np.zeros(16, np.uint8), "x": np.zeros((case.ncols, case.cols), np.float32),
           "xq": np.zeros((case.ncols, nchunks * 36), np.uint8)}
    names = {}
    for variant in variants:
        kernels = RecordingKernels()
        fam.launch(case, variant, kernels, dev, {"y": np.zeros((case.ncols, case.rows), np.float32)})
        names[variant] = kernels.names
    return names
