"""The prompt-expert GEMM's tensor-core reference (issue 14): cuBLAS GemmEx on the case's weights
pre-dequantized to fp16, the rate pfgemm's kernels are measured against.

Why not cupy.matmul: on the H200 it reached 16.5 TFLOP/s on the bench shape and 49 for 8192^3, far
from the tensor-core rate (torch bf16: ~790). Here cuBLAS is called directly through CuPy's bindings
(cupy_backends.cuda.libs.cublas, CuPy 14): fp16 A and B (CUDA_R_16F), fp32 C (CUDA_R_32F, as the
kernels' Y), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP, on a handle of its own with an explicit
workspace (so the calls can be captured in a CUDA graph). Equal groups: one strided-batched GEMM over
the experts; uneven groups: one GEMM per non-empty group. Y (T, N) row-major = X (T, K) W_e^T is, in
cuBLAS's column-major terms, C (N x T_e) = op_T(W_e: K x N) op_N(X_e: K x T_e).

Timing: the project's timing core (timing/graph.py replays, timing/trials.py stop rule): a CUDA graph
of enough calls for ~2 ms, events around each replay; the fp16 weights of the bench cases (840 MB) are
14x the L2, so every call reads them from DRAM. Where capture fails the calls are timed between events
without a graph, and the record says so. torch.matmul (fp16, fp32 accumulation) is a second reference
row where torch is importable.
"""
from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from strata_bench.kit import Case

CUDA_R_32F, CUDA_R_16F = 0, 2  # cudaDataType_t (library_types.h)
WORKSPACE_BYTES = 32 << 20  # cuBLAS's recommended workspace on Hopper; given explicitly for graph capture
DEQUANT_CHUNK_ROWS = 4096


@dataclass(frozen=True)
class ReferenceTiming:
    """One reference's timing of one case: per-call samples and how they were taken."""

    case: str
    reference: str  # "cublas-gemmex" or "torch-matmul"
    samples_us: tuple[float, ...]
    launches_per_sample: int
    flops: int
    timing: str  # "graph" (CUDA graph replays) or "events" (a plain loop between events)
    ci_rel: float = math.nan
    note: str = ""

    @property
    def median_us(self) -> float:
        return float(np.median(self.samples_us))

    @property
    def tflops(self) -> float:
        return self.flops / (self.median_us * 1e-6) / 1e12

    def to_record(self) -> dict[str, Any]:
        return {"case": self.case, "reference": self.reference, "median_us": self.median_us,
                "tflops": self.tflops, "ci_rel": None if math.isnan(self.ci_rel) else self.ci_rel,
                "trials": len(self.samples_us), "launches_per_sample": self.launches_per_sample,
                "timing": self.timing, "note": self.note, "samples_us": list(self.samples_us)}


def fp16_weights(fmt: str, raw: np.ndarray, cols: int, workers: int | None = None) -> np.ndarray:
    """The kernels' fp16 weights: the oracle's exact float32 values rounded to nearest even (one
    rounding: the float32 values are exact, pfgemm.exact_weights), chunks of rows on a thread pool."""
    from strata_bench.formats import get_format

    spec = get_format(fmt)
    out = np.empty((raw.shape[0], cols), dtype=np.float16)

    def one(start: int) -> None:
        out[start:start + DEQUANT_CHUNK_ROWS] = spec.dequantize(raw[start:start + DEQUANT_CHUNK_ROWS])

    with ThreadPoolExecutor(max_workers=workers or min(16, os.cpu_count() or 1)) as pool:
        list(pool.map(one, range(0, raw.shape[0], DEQUANT_CHUNK_ROWS)))
    return out


class CublasGemm:
    """Device inputs and a cuBLAS handle for one case; `enqueue()` puts the GEMM(s) on the current stream."""

    def __init__(self, x16: np.ndarray, w16: np.ndarray, sizes: np.ndarray) -> None:
        import cupy
        from cupy_backends.cuda.libs import cublas

        self.cublas = cublas
        self.experts, self.n, self.k = w16.shape
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.x = cupy.asarray(x16)
        self.w = cupy.asarray(w16)
        self.y = cupy.zeros((x16.shape[0], self.n), dtype=cupy.float32)
        self.handle = cublas.create()
        self.workspace = cupy.empty(WORKSPACE_BYTES, dtype=cupy.uint8)
        if hasattr(cublas, "setWorkspace"):
            cublas.setWorkspace(self.handle, self.workspace.data.ptr, WORKSPACE_BYTES)
        self.alpha = np.ones(1, dtype=np.float32)
        self.beta = np.zeros(1, dtype=np.float32)
        self.bounds = np.concatenate([[0], np.cumsum(self.sizes)])

    def enqueue(self) -> None:
        cb = self.cublas
        n, k = self.n, self.k
        common = (self.handle, cb.CUBLAS_OP_T, cb.CUBLAS_OP_N)
        if (self.sizes == self.sizes[0]).all():
            g = int(self.sizes[0])
            if g == 0:
                return
            cb.gemmStridedBatchedEx(*common, n, g, k, self.alpha.ctypes.data,
                                    self.w.data.ptr, CUDA_R_16F, k, n * k,
                                    self.x.data.ptr, CUDA_R_16F, k, g * k, self.beta.ctypes.data,
                                    self.y.data.ptr, CUDA_R_32F, n, g * n, self.experts,
                                    cb.CUBLAS_COMPUTE_32F, cb.CUBLAS_GEMM_DEFAULT_TENSOR_OP)
            return
        for e in range(self.experts):
            t0, g = int(self.bounds[e]), int(self.sizes[e])
            if g == 0:
                continue
            cb.gemmEx(*common, n, g, k, self.alpha.ctypes.data,
                      self.w.data.ptr + e * n * k * 2, CUDA_R_16F, k,
                      self.x.data.ptr + t0 * k * 2, CUDA_R_16F, k, self.beta.ctypes.data,
                      self.y.data.ptr + t0 * n * 4, CUDA_R_32F, n, cb.CUBLAS_COMPUTE_32F,
                      cb.CUBLAS_GEMM_DEFAULT_TENSOR_OP)

    def close(self) -> None:
        self.cublas.destroy(self.handle)


def time_calls(enqueue: Callable[[], None], cfg) -> tuple[list[float], float, int, str]:
    """(samples us per call, ci_rel, calls per sample, "graph" or "events") for `enqueue` on a stream of
    its own: probe one call, size a graph to ~cfg.graph_target_s, replay it under the trials' stop rule."""
    import cupy

    from strata_bench.timing.graph import replay_seconds, size_launches
    from strata_bench.timing.trials import run_trials

    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        for _ in range(3):  # outside any capture: cuBLAS picks and loads its kernels here
            enqueue()
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        enqueue()
        stop.record(stream)
        stop.synchronize()
        one = cupy.cuda.get_elapsed_time(start, stop) / 1e3
        calls = size_launches(one, 1, cfg.graph_target_s)
        try:
            stream.begin_capture()
            for _ in range(calls):
                enqueue()
            graph = stream.end_capture()
            how = "graph"

            def replay() -> float:
                return replay_seconds(graph, stream)
        except Exception:  # noqa: BLE001 - capture refused (an old cuBLAS without setWorkspace): time a loop
            _abandon_capture(stream)
            how = "events"

            def replay() -> float:
                a, b = cupy.cuda.Event(), cupy.cuda.Event()
                a.record(stream)
                for _ in range(calls):
                    enqueue()
                b.record(stream)
                b.synchronize()
                return cupy.cuda.get_elapsed_time(a, b) / 1e3
        for _ in range(3):
            replay()
        samples, ci_rel = run_trials(replay, calls, cfg)
    return samples, ci_rel, calls, how


def _abandon_capture(stream) -> None:
    try:
        if stream.is_capturing():
            stream.end_capture()
    except Exception:  # noqa: BLE001 - a capture that failed may fail to end too: the loop timing goes on
        pass


def case_inputs(family, case: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X fp16 (T, K), W fp16 (E, N, K), group sizes): the kernels' inputs, the weights pre-dequantized."""
    host = family.make_inputs(case)
    sizes = host["sizes"]
    w16 = fp16_weights(case.fmt, host["w"], case.cols).reshape(sizes.size, case.rows, case.cols)
    return host["x"], w16, sizes


def cublas_reference(family, case: Case, cfg, inputs=None) -> tuple[ReferenceTiming, Any]:
    """Time cuBLAS GemmEx on the case's fp16 weights; returns (timing, Y as a cupy array)."""
    x16, w16, sizes = inputs if inputs is not None else case_inputs(family, case)
    gemm = CublasGemm(x16, w16, sizes)
    try:
        samples, ci_rel, calls, how = time_calls(gemm.enqueue, cfg)
        gemm.y.fill(0)
        gemm.enqueue()  # the checked result: one call on a zeroed Y
        y = gemm.y
    finally:
        import cupy

        cupy.cuda.runtime.deviceSynchronize()  # nothing may still use the handle when it is destroyed
        gemm.close()
    return ReferenceTiming(case.name, "cublas-gemmex", tuple(samples), calls, family.flops(case), how,
                           ci_rel, "fp16 in, fp32 out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP"), y


def torch_reference(family, case: Case, cfg, inputs) -> ReferenceTiming | None:
    """torch.matmul per group (fp16, fp32 accumulation: allow_fp16_reduced_precision_reduction off),
    timed the same way; None where torch is not importable or has no CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    x16, w16, sizes = inputs
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    x = torch.from_numpy(x16).cuda()
    w = torch.from_numpy(w16).cuda()
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    equal = bool((sizes == sizes[0]).all())
    xb = x.reshape(sizes.size, int(sizes[0]), case.cols) if equal else None

    def enqueue() -> None:
        import cupy

        with torch.cuda.stream(torch.cuda.ExternalStream(cupy.cuda.get_current_stream().ptr)):
            if equal:
                torch.matmul(xb, w.transpose(1, 2))
            else:
                for e in range(sizes.size):
                    if sizes[e]:
                        torch.matmul(x[bounds[e]:bounds[e + 1]], w[e].T)

    samples, ci_rel, calls, how = time_calls(enqueue, cfg)
    return ReferenceTiming(case.name, "torch-matmul", tuple(samples), calls, family.flops(case), how, ci_rel,
                           f"torch {torch.__version__}, fp16 in and out, fp32 accumulation")


def kernel_shares(reference: ReferenceTiming, bench_records: list[dict[str, Any]]) -> dict[str, Any]:
    """Columns for each pfgemm variant of the same case in a bench file: its us, TFLOP/s and share of
    this reference's rate (reference us / kernel us; the kernel's time includes its dequantization)."""
    cols: dict[str, Any] = {}
    for r in bench_records:
        if r.get("case") == reference.case and r.get("status") == "timed" and r.get("median_us"):
            v = r["variant"]
            cols[f"{v}_us"] = r["median_us"]
            cols[f"{v}_tflops"] = reference.flops / (r["median_us"] * 1e-6) / 1e12
            cols[f"{v}_share"] = reference.median_us / r["median_us"]
    return cols
