"""What the experiments' host tests of mmvq_onecol decoders share (experiments/mmvq_onecol3, mmvq_onecol1m): a host
driver built from its .cpp (experiments/mmvq_onecol/tests/onecol_host.cpp included with the experiment's decoder),
run on a case's data beside tests/iq_host's one-warp-per-row `dot` (mmvq_old's arithmetic), and the readings of an
NVRTC build: each kernel's ptxas log, and a loop's instructions a chunk from its SASS."""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from iq_host import harness

REPO = Path(__file__).resolve().parents[2]
# onecol_host.cpp's include path: the product's kernels, the CUDA stand-ins, mmvq_onecol's decoders and driver
DRIVER_DIRS = (REPO / "kernels_src", REPO / "tests" / "iq_host" / "include", REPO / "experiments" / "mmvq_onecol" /
               "kernels", REPO / "experiments" / "mmvq_onecol" / "tests")


@functools.lru_cache(maxsize=None)
def build(source: Path, kernels: Path, defines: tuple[str, ...] = ()) -> Path:
    """The driver `source` built with the experiment's kernels folder on the include path, and -D `defines` (the
    overrides of a decoder's planted-defect macros); once a process."""
    cxx = shutil.which("g++") or shutil.which("clang++") or pytest.skip("no C++ compiler (g++ or clang++) on PATH")
    exe = Path(tempfile.mkdtemp(prefix=f"{source.stem}-")) / source.stem
    proc = subprocess.run([cxx, "-std=c++17", "-O2", "-Wall", "-Wno-unknown-pragmas", *(f"-D{d}" for d in defines),
                           *(f"-I{d}" for d in (*DRIVER_DIRS, kernels)), "-o", str(exe), str(source)],
                          capture_output=True, text=True)
    if proc.returncode != 0 and "_Float16" in proc.stderr:
        pytest.skip(f"{cxx} has no _Float16")
    assert proc.returncode == 0, proc.stderr
    return exe


def old_and_driver(fam, source: Path, kernels: Path, decoder: str, fmt: str, rows: int, cols: int, ncols: int,
                   data: str, defect: str = "", defines: tuple[str, ...] = ()) -> tuple[np.ndarray, np.ndarray]:
    """y[ncols][rows] of the case as one warp a row computes it (mmvq_old) and as the driver `source` does with
    `decoder` (built by build(source, kernels, defines); ONECOL_DEFECT `defect`)."""
    exe = build(source, kernels, tuple(defines))
    host = fam.make_inputs(fam.case(fmt, rows, cols, ncols, data))
    raw, act = host["raw"], host["act"]
    with tempfile.TemporaryDirectory() as tmp:
        w, x, y = (Path(tmp) / n for n in ("w.bin", "x.bin", "y.bin"))
        np.ascontiguousarray(raw, dtype=np.uint8).tofile(w)
        np.ascontiguousarray(act, dtype=np.uint8).tofile(x)
        subprocess.run([str(exe), decoder, str(rows), str(cols), str(w), str(x), str(act.shape[0]), str(y)],
                       check=True, env={**os.environ, "ONECOL_DEFECT": defect})
        mine = np.fromfile(y, dtype=np.float32).reshape(act.shape[0], rows)
    return harness.run_dot(fmt, raw, cols, act), mine


def differing(a: np.ndarray, b: np.ndarray) -> int:
    """How many outputs differ in their bits."""
    return int((a.view(np.uint32) != b.view(np.uint32)).sum())


CUOBJDUMP = shutil.which(os.environ.get("CUOBJDUMP", "cuobjdump"))
needs_cuobjdump = pytest.mark.skipif(CUOBJDUMP is None,
                                     reason="no cuobjdump (set CUOBJDUMP=path): the SASS is not read")


@functools.lru_cache(maxsize=None)
def compile_experiment(cases, family):
    """The experiment's own source (cases.OWN_SOURCE in cases.KERNELS) with its family's kernels (an instance of
    `family`), for sm_90; once a process."""
    from strata_bench.kernels.build import compile_source

    return compile_source(cases.OWN_SOURCE, family().name_expressions(cases.OWN_SOURCE), "sm_90", root=cases.KERNELS)


def assert_no_spills_and_declared_static_shared(built, candidates) -> None:
    """Each candidate's kernel: no spill, and the static shared memory its launch declares (.static_bytes)."""
    logs = kernel_logs(built)
    for cand in candidates:
        assert "0 bytes spill stores, 0 bytes spill loads" in logs[cand.kernel], logs[cand.kernel]
        assert re.search(rf"\b{cand.static_bytes} bytes smem", logs[cand.kernel]), logs[cand.kernel]


def kernel_logs(built) -> dict[str, str]:
    """Each name expression's part of an NVRTC build's ptxas log."""
    names, logs, current = {v: k for k, v in built.lowered.items()}, {}, None
    for line in built.log.splitlines():
        m = re.search(r"Compiling entry function '(\S+)'", line)
        current = names.get(m.group(1)) if m else current
        if current:
            logs[current] = logs.get(current, "") + line + "\n"
    return logs


def loop_per_chunk(built, kernel: str, idp: int, chunks: int, cuobjdump: str) -> tuple[dict[str, float], float]:
    """The first loop of `kernel` with `idp` dp4a: its opcode counts and its instructions, each a chunk."""
    from strata_bench.kernels.sass import dump_sass, loops, parse_functions

    body = [lp for lp in loops(parse_functions(dump_sass(built.cubin, cuobjdump))[built.lowered[kernel]])
            if lp.counts["IDP"] == idp][0]
    return {op: n / chunks for op, n in body.counts.items()}, len(body.opcodes) / chunks
