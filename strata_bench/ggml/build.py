"""How a ggml tree's sources are built: with nvcc, unchanged, with ggml's own CUDA flags (its CMake gives
`-use_fast_math -extended-lambda`, C++17, and -O3 -DNDEBUG in a release build), the tree's three include
folders on the path. Each source is one translation unit and so one cubin per architecture; its kernels
are found by their demangled names (kernels/cubin_symbols.py).

ggml-cuda's headers include cuBLAS's (`vendors/cuda.h` -> cublas_v2.h) for host code only. A toolkit
without cuBLAS's headers (a CPU host's nvcc) gets them from the nvidia-cublas wheel where it is installed
(copied to a folder of their own: the wheels' shared include folder holds other CUDA headers too);
the device code does not read them, and on the H200 the cubin built against the wheel's headers was
byte-identical to the one built against the toolkit's.

Where nvcc is not found or has no cuBLAS headers, or STRATA_GGML_COMPILER=nvrtc, the same sources are built
by NVRTC instead (nvrtc_prelude.py: this project's stub headers and prelude, first on the include path, and
`-default-device` for ggml's host code), with ggml's float options as NVRTC takes them (`-use_fast_math`
with `-ftz=true -prec-div=false -prec-sqrt=false`, which replace the project's IEEE ones) and C++17 (the
project's default). NVRTC has no `-extended-lambda` and needs none: the host code it compiles never runs.
ggml's host code instantiates every kernel of its file, so each source is one NVRTC program, as with nvcc.
"""
from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

from strata_bench.errors import InputError
from strata_bench.ggml import spelling
from strata_bench.ggml.nvrtc_prelude import PRELUDE, include_dir
from strata_bench.ggml.tree import INCLUDE_DIRS, GgmlTree
from strata_bench.kernels import nvcc
from strata_bench.kernels.jobs import shown_path
from strata_bench.kernels.variant_build import KernelCheck, SourceBuild

FLAGS = ("-std=c++17", "-O3", "-DNDEBUG", "-use_fast_math", "-extended-lambda")
# NVRTC: -std=c++17 is the project's base option; -O3 is NVRTC's default.
NVRTC_FLAGS = ("-default-device", f"--pre-include={PRELUDE}", "-DNDEBUG",
               "-ftz=true", "-prec-div=false", "-prec-sqrt=false", "-use_fast_math")
CUBLAS_HEADER = "cublas_v2.h"
COMPILER_ENV = "STRATA_GGML_COMPILER"
COMPILERS = ("nvcc", "nvrtc")


def compiler() -> str:
    """$STRATA_GGML_COMPILER where set (nvcc or nvrtc), else nvcc where it is found and cuBLAS's headers
    are there for it (the toolkit's or the wheel's), else NVRTC, whose stubs need neither."""
    chosen = os.environ.get(COMPILER_ENV, "").strip()
    if chosen:
        if chosen.lower() not in COMPILERS:
            raise InputError(f"{COMPILER_ENV}={chosen}: expected one of {', '.join(COMPILERS)}")
        return chosen.lower()
    try:
        nvcc.find_nvcc()
        cublas_include_dirs()
    except InputError:  # NvccMissing is one
        return "nvrtc"
    return "nvcc"


def source_build(tree: GgmlTree, source: str, label: str, check: KernelCheck | None = None) -> SourceBuild:
    """The build of one of the tree's sources by compiler() (nvcc or NVRTC); `label` names the variant in
    messages."""
    include = [f"-I{tree.root / d}" for d in INCLUDE_DIRS]
    origin = (("ggml_tree", str(tree.root)), ("ggml_version", tree.version), ("ggml_sha256", tree.content_hash))
    where = f"{label} ({shown_path(tree.root)})"
    if compiler() == "nvrtc":
        return SourceBuild("nvrtc", tree.path(source), where, (*NVRTC_FLAGS, *include), inputs_hash=tree.content_hash,
                           check=check, origin=origin, first_options=stub_options, whole=True)
    return SourceBuild("nvcc", tree.path(source), where, (*FLAGS, *include),
                       inputs_hash=tree.content_hash, check=check, origin=origin, late_options=cublas_options,
                       symbol_name=functools.partial(spelling.complete, tree.root, tree.path(source)))


def source_unit(tree: GgmlTree, source: str, variant: str) -> str:
    """The build unit of one of the tree's sources for one variant (ggml and ggml_b build theirs apart)."""
    return f"{tree.path(source)}@{variant}"


def stub_options() -> tuple[str, ...]:
    """-I for the NVRTC build's own stub headers and prelude, written into the cache when it is built."""
    return (f"-I{include_dir()}",)


def cublas_options() -> tuple[str, ...]:
    """-I for cuBLAS's headers where the toolkit lacks them, found when the source is built (listing the
    variants needs no cuBLAS)."""
    return tuple(f"-I{d}" for d in cublas_include_dirs())


def cublas_include_dirs() -> list[Path]:
    """[] where nvcc's toolkit has cuBLAS's headers; else the nvidia-cublas wheel's include folder;
    InputError where neither has them (ggml's headers cannot compile without)."""
    try:
        toolkit = Path(nvcc.find_nvcc()).resolve().parent.parent
    except nvcc.NvccMissing:
        return []  # the build itself says nvcc is missing
    places = [toolkit / "include", *sorted(toolkit.glob("targets/*/include"))]
    if any((p / CUBLAS_HEADER).is_file() for p in places):
        return []
    wheel = _wheel_include()
    if wheel is not None:
        return [_cublas_only(wheel)]
    raise InputError(f"--ggml: the CUDA toolkit at {toolkit} has no {CUBLAS_HEADER}, which ggml-cuda's headers "
                     f"include; install the toolkit's cuBLAS headers or `pip install nvidia-cublas`")


def _cublas_only(include: Path) -> Path:
    """A folder holding only cuBLAS's headers, copied from `include`: the wheels share one include folder
    (nvidia/cu13/include), and another wheel's CUDA runtime headers there, of another release than nvcc's,
    must not shadow the toolkit's (ptxas then misses their device functions)."""
    import hashlib

    from strata_bench.kernels.build import cache_dir
    from strata_bench.kernels.cache_write import publish_folder

    headers = sorted(include.glob("cublas*.h"))
    digest = hashlib.sha256(b"".join(h.name.encode() + h.read_bytes() for h in headers)).hexdigest()[:16]
    return publish_folder(cache_dir() / f"cublas-include-{digest}", {h.name: h.read_bytes() for h in headers})


def _wheel_include() -> Path | None:
    for package in ("nvidia.cu13", "nvidia.cublas"):
        try:
            spec = importlib.util.find_spec(package)
        except ModuleNotFoundError:
            continue
        for root in (spec.submodule_search_locations or []) if spec else []:
            if (Path(root) / "include" / CUBLAS_HEADER).is_file():
                return Path(root) / "include"
    return None
