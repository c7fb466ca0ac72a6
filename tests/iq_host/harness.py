"""Builds and runs tests/iq_host/iq_host.cpp: the i-quant decoders of kernels_src (common/iq_decode.cuh, dequant/dequant.cuh) compiled for the CPU.

The tests use it to check the CUDA decode code itself (not a re-implementation) against gguf-py, and to
run the exact per-output arithmetic of mmvq.cu's warps against the float64 tolerances. Skips when no C++
compiler with _Float16 is on PATH.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CHUNK_RECORD = np.dtype([("w", "<i4", 8), ("ls0", "<i4"), ("ls1", "<i4"), ("dw", "<f4"), ("v", "<f4", 32),
                         ("isum", "<i4"), ("isum_f", "<f4")])


@functools.lru_cache(maxsize=None)
def _binary(headers: tuple[str, ...] = (), defines: tuple[str, ...] = ()) -> tuple[Path | None, str]:
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        return None, "no C++ compiler (g++ or clang++) on PATH"
    out = Path(tempfile.mkdtemp(prefix="iq_host-")) / "iq_host"
    extra = [arg for h in headers for arg in ("-include", h)] + [f"-D{d}" for d in defines]
    cmd = [cxx, "-std=c++17", "-O2", "-Wall", "-Wno-unknown-pragmas", f"-I{REPO / 'kernels_src'}",
           f"-I{HERE / 'include'}", *extra, "-o", str(out), str(HERE / "iq_host.cpp")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        if "_Float16" in proc.stderr:
            return None, f"{cxx} has no _Float16: {proc.stderr.strip().splitlines()[0]}"
        raise AssertionError(f"host build of the i-quant decoders failed:\n{proc.stderr}")
    return out, ""


def binary(headers: tuple[str, ...] = (), defines: tuple[str, ...] = ()) -> Path:
    """The host build; an experiment adds its own kernel headers (included first) and defines, e.g. the
    MmaFrag of more formats and MMA_EMUL_EXTRA_FORMATS (mma_emul.h) to run dot_mma for them."""
    path, reason = _binary(tuple(headers), tuple(defines))
    if path is None:
        pytest.skip(reason)
    return path


def run_chunks(fmt: str, blocks: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Per chunk of `blocks` (n, type_size): decode contract fields, dequantized values, isum with q."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        np.ascontiguousarray(blocks, dtype=np.uint8).tofile(tmp / "b.bin")
        np.ascontiguousarray(q, dtype=np.int8).tofile(tmp / "q.bin")
        subprocess.run([str(binary()), fmt, str(tmp / "b.bin"), str(tmp / "q.bin"), str(tmp / "o.bin")], check=True)
        return np.fromfile(tmp / "o.bin", dtype=CHUNK_RECORD)


def run_dot(fmt: str, raw: np.ndarray, cols: int, act: np.ndarray, mode: str = "dot", defect: str = "",
            build: Path | None = None, extra: tuple[str, ...] = ()) -> np.ndarray:
    """y (n, rows) float32 as mmvq.cu's warps compute it, for raw weights (rows, bytes) and q8_1 rows act;
    mode "dot_mma": as mmvq_mma.cu schedules it (tests/iq_host/mma_emul.h), with `defect` one planted in a
    tail path of that schedule (mma_emul.h's Defect); mode "dot_onecol" with extra = (R,): as mmvq_onecol.cu
    schedules its one-column pass (onecol_emul.h, its Defect likewise). `build`: a binary(...) of an
    experiment's headers (default: the built-in one)."""
    rows, n = raw.shape[0], act.shape[0]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        np.ascontiguousarray(raw, dtype=np.uint8).tofile(tmp / "w.bin")
        np.ascontiguousarray(act, dtype=np.uint8).tofile(tmp / "x.bin")
        subprocess.run([str(build or binary()), mode, fmt, str(rows), str(cols), str(tmp / "w.bin"), str(tmp / "x.bin"),
                        str(n), str(tmp / "y.bin"), *extra], check=True, env={**os.environ, "MMA_EMUL_DEFECT": defect})
        return np.fromfile(tmp / "y.bin", dtype=np.float32).reshape(n, rows)
