"""Print every kernel launch the built-in families make, on a host without a GPU.

    PYTHONPATH=$PWD python scripts/launch_trace.py [--skip-bench REGEX] > trace.txt

A small numpy stand-in replaces cupy (device arrays are numpy arrays with a virtual pointer from a
512-byte-aligned bump allocator, like cupy's pool) and the kernels object records each call instead of
launching. For every default parity case (with its related cases) and every bench case, and for each of
its variants, the script runs make_inputs -> to_device -> alloc_outputs -> launch and prints one line
per launch: case, variant, name expression, grid, block, shared memory, and per argument its dtype and
shape with its allocation and byte offset (arrays), or its type and value (scalars). Run it on two
trees; identical output means both launch the same kernels with the same geometry and arguments.
"""
from __future__ import annotations

import argparse
import re
import sys
import types

import numpy as np

SMS, BLOCKS_PER_SM = 132, 2  # the fixed occupancy the stand-in reports (an H200 has 132 SMs)
ALIGN = 512


class _Pointer:
    def __init__(self, ptr: int):
        self.ptr = ptr


class FakeArray:
    """A 'device' array: a numpy array, the allocation it belongs to and its virtual address."""

    def __init__(self, a: np.ndarray, alloc: int, base_ptr: int, base: np.ndarray):
        self.a, self.alloc, self._base_ptr, self._base = a, alloc, base_ptr, base

    @property
    def offset(self) -> int:
        return self.a.__array_interface__["data"][0] - self._base.__array_interface__["data"][0]

    @property
    def data(self) -> _Pointer:
        return _Pointer(self._base_ptr + self.offset)

    def _wrap(self, a: np.ndarray) -> "FakeArray":
        return FakeArray(a, self.alloc, self._base_ptr, self._base)

    shape = property(lambda self: self.a.shape)
    dtype = property(lambda self: self.a.dtype)
    size = property(lambda self: self.a.size)
    nbytes = property(lambda self: self.a.nbytes)
    ndim = property(lambda self: self.a.ndim)

    def __getitem__(self, key):
        return self._wrap(self.a[key])

    def view(self, dtype):
        return self._wrap(self.a.view(dtype))

    def reshape(self, *shape):
        return self._wrap(self.a.reshape(*shape))

    def __len__(self):
        return len(self.a)


class _Allocator:
    def __init__(self):
        self.next_ptr, self.count = 1 << 32, 0

    def new(self, a: np.ndarray) -> FakeArray:
        ptr = self.next_ptr
        self.next_ptr += -(-max(a.nbytes, 1) // ALIGN) * ALIGN
        self.count += 1
        return FakeArray(a, self.count, ptr, a)


ALLOC = _Allocator()


def _fake_cupy() -> types.ModuleType:
    cp = types.ModuleType("cupy")
    for name in ("uint8", "int8", "uint16", "int16", "uint32", "int32", "int64", "float16", "float32", "float64"):
        setattr(cp, name, getattr(np, name))
    cp.ndarray = FakeArray
    # No copy of host arrays: the trace needs shapes, dtypes and addresses, not the bytes.
    cp.asarray = lambda a, dtype=None: a if isinstance(a, FakeArray) else ALLOC.new(np.asarray(a, dtype=dtype))
    cp.empty = lambda shape, dtype=np.float32: ALLOC.new(np.empty(shape, dtype=dtype))
    cp.zeros = lambda shape, dtype=np.float32: ALLOC.new(np.zeros(shape, dtype=dtype))
    cuda = types.SimpleNamespace(Device=lambda *a: types.SimpleNamespace(id=0))
    cp.cuda = cuda
    return cp


def _fake_cupy_backends() -> dict[str, types.ModuleType]:
    driver = types.ModuleType("cupy_backends.cuda.api.driver")
    driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
    driver.funcSetAttribute = lambda ptr, attr, value: print(f"  opt-in {KERNEL_NAMES[ptr]} shared={value}")
    driver.occupancyMaxActiveBlocksPerMultiprocessor = lambda ptr, threads, shared: BLOCKS_PER_SM
    runtime = types.ModuleType("cupy_backends.cuda.api.runtime")
    runtime.getDeviceProperties = lambda dev: {"multiProcessorCount": SMS, "major": 9, "minor": 0,
                                               "sharedMemPerBlockOptin": 227 * 1024}
    api = types.ModuleType("cupy_backends.cuda.api")
    api.driver, api.runtime = driver, runtime
    cuda = types.ModuleType("cupy_backends.cuda")
    cuda.api = api
    root = types.ModuleType("cupy_backends")
    root.cuda = cuda
    return {"cupy_backends": root, "cupy_backends.cuda": cuda, "cupy_backends.cuda.api": api,
            "cupy_backends.cuda.api.driver": driver, "cupy_backends.cuda.api.runtime": runtime}


KERNEL_NAMES: dict[int, str] = {}


def describe(arg) -> str:
    if isinstance(arg, FakeArray):
        return f"{arg.dtype}{list(arg.shape)}@a{arg.alloc}+{arg.offset}"
    if isinstance(arg, np.ndarray):
        return f"HOST {arg.dtype}{list(arg.shape)}"
    if arg is None:
        return "None"
    return f"{type(arg).__name__}({arg!r})"


class Recorder:
    """What kernels.get(expr) returns: prints each call instead of launching."""

    def __init__(self, expr: str, label: list[str]):
        self.expr, self.label = expr, label
        self.ptr = 0x1000 + len(KERNEL_NAMES)
        KERNEL_NAMES[self.ptr] = expr

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        shown = ", ".join(describe(a) for a in args)
        print(f"{self.label[0]} | {self.expr} | grid={tuple(grid)!r} block={tuple(block)!r} "
              f"shared={shared_mem!r} | {shown}")


class FakeKernels:
    def __init__(self, label: list[str]):
        self.label, self.cache = label, {}

    def get(self, expr: str) -> Recorder:
        if expr not in self.cache:
            self.cache[expr] = Recorder(expr, self.label)
        return self.cache[expr]


def trace_case(family, case, kernels: FakeKernels, label: list[str], related: bool) -> None:
    try:
        host = family.make_inputs(case)
        dev = family.to_device(case, host)
    except Exception as exc:  # noqa: BLE001 - the trace records what each tree raises
        print(f"{case.name} | inputs raised {type(exc).__name__}: {exc}")
        return
    for variant in case.variants:
        label[0] = f"{case.name} | {variant}"
        try:
            outs = family.alloc_outputs(case, dev)
            family.launch(case, variant, kernels, dev, outs)
        except Exception as exc:  # noqa: BLE001
            print(f"{label[0]} | raised {type(exc).__name__}: {exc}")
    if related:
        for other, output, _ in family.related_cases(case):
            print(f"{case.name} | related {other.name} {output}")
            trace_case(family, other, kernels, label, related=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-bench", default=None, help="regex of bench case names not to trace")
    parser.add_argument("--family", action="append", default=[], help="only these families")
    args = parser.parse_args()
    sys.modules["cupy"] = _fake_cupy()
    sys.modules.update(_fake_cupy_backends())
    from strata_bench.families import load_builtin_families

    families = load_builtin_families()
    label = [""]
    for name, family in families.items():
        if args.family and name not in args.family:
            continue
        kernels = FakeKernels(label)
        print(f"# family {name}: parity cases")
        for case in family.default_cases():
            trace_case(family, case, kernels, label, related=True)
        print(f"# family {name}: bench cases")
        for case in family.bench_cases():
            if args.skip_bench and re.search(args.skip_bench, case.name):
                print(f"{case.name} | skipped")
                continue
            trace_case(family, case, kernels, label, related=False)


if __name__ == "__main__":
    main()
