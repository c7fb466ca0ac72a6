"""One launch of a ggml kernel: its name expression, geometry and arguments, each argument with the C type
ggml's kernel declares, so the launch is checked against the cubin's parameter table (toml_abi/abi_check.py)
before anything runs, as a TOML variant's is.

ggml's kernels take packed rows (a row stride in whole blocks, every row of a CUDA block readable, since
only the writes are guarded), so a case whose rows are padded to 16 bytes, or whose last CUDA block
reaches past the last row, runs on a packed copy (`packed_rows`), made once per device copy by the
variant's `prepare` (Family.device_inputs), never inside the timed launch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from strata_bench.toml_abi.abi_check import check_params
from strata_bench.toml_abi.c_types import CType, as_argument, parse_ctype, struct_type

U32 = parse_ctype("uint32_t")
I32 = parse_ctype("int")
I64 = parse_ctype("int64_t")
UINT3 = parse_ctype("uint3")
VOID_P = parse_ctype("const void*")
FLOAT_P = parse_ctype("float*")
INT_P = parse_ctype("const int32_t*")
# ggml_cuda_mm_fusion_args_device (common.cuh): five pointers, the GLU enum, a float; zero means no fusion.
FUSION = struct_type("ggml_cuda_mm_fusion_args_device", [
    ("x_bias", VOID_P), ("gate", VOID_P), ("gate_bias", VOID_P), ("x_scale", VOID_P), ("gate_scale", VOID_P),
    ("glu_op", I32), ("glu_limit", parse_ctype("float"))])
NO_FUSION: dict[str, Any] = {}


@dataclass(frozen=True)
class Argument:
    """One kernel argument: how messages name it, its C type and its value."""

    label: str
    ctype: CType
    value: Any


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    params: tuple[Argument, ...]
    shared: int = 0  # dynamic shared memory in bytes (mul_mat_q's tiles; over 48 KiB it is opted in to)

    def run(self, lookup: Callable[[str], Any], stream: Any) -> None:
        from strata_bench.kernels.launch import allow_dynamic_shared

        fn = lookup(self.kernel)
        args = tuple(as_argument(p.ctype, p.value) for p in self.params)
        if not self.shared:
            fn(self.grid, self.block, args, stream=stream)
            return
        allow_dynamic_shared(fn, self.shared)
        fn(self.grid, self.block, args, shared_mem=self.shared, stream=stream)


def packed_rows(w: Any, rows: int, stride: int, row_bytes: int, readable_rows: int) -> Any:
    """A device copy of `rows` rows of `row_bytes` each, read from rows `stride` bytes apart, contiguous,
    followed by zero rows up to `readable_rows`."""
    import cupy

    flat = w.reshape(-1)
    out = cupy.zeros((readable_rows, row_bytes), dtype=cupy.uint8)
    out[:rows] = flat[:rows * stride].reshape(rows, stride)[:, :row_bytes]
    return out


def needs_packing(stride: int, row_bytes: int, rows: int, readable_rows: int) -> bool:
    return stride != row_bytes or readable_rows > rows


def compute_capability(array: Any) -> tuple[int, int] | None:
    """(major, minor) of the device a device array is on (CuPy's compute_capability: "90", "121")."""
    cc = getattr(getattr(array, "device", None), "compute_capability", None)
    return (int(cc[:-1]), int(cc[-1])) if isinstance(cc, str) and cc.isdigit() else None


def lookup_in(kernels: Any, unit: str) -> Callable[[str], Any]:
    """name expression -> compiled kernel, from the variant's own source (as a TOML variant looks up)."""
    in_source = getattr(kernels, "in_source", None)
    return (lambda name: in_source(unit, name)) if in_source is not None else kernels.get


def checker(signature: Callable[[str], Sequence[tuple[str, CType]]], where: str) -> Callable[[str, Any], None]:
    """expr, cubin kernel -> None: the parameters a launch of `expr` passes (`signature`: label and C type
    of each) checked against the cubin's parameter table."""

    def check(expr: str, kernel: Any) -> None:
        params = signature(expr)
        check_params(kernel, [t for _, t in params], [label for label, _ in params], where, expr)

    return check
