"""The plan of one engine build: tools, architecture, targets, cache key, and the CMake command lines.

Where things go (outside any checkout):
    $STRATA_CACHE_DIR/engines or ~/.cache/strata-bench/engines
        <key>/bin/             the built executables and their shared libraries (a finished build)
        <key>/build.json       what was built, from what, with what, and how long it took
        work/<slot>/src/       the tree being built, copied in (only changed files are rewritten)
        work/<slot>/build/     CMake's build folder, reused by every build of the slot

Why one workspace per slot: CMake records its source and build folders in CMakeCache.txt and refuses
a build folder copied to another path, and ninja rebuilds by timestamps. So every tree is built in the
same two folders: tree B is copied over A's sources, rewriting only the files whose content differs
(their new timestamp is later than every object), and ninja then rebuilds exactly what those files
touch. A's build is not lost: its executables were copied out to <A's key>/bin, and they find their own
shared libraries there (CMAKE_BUILD_RPATH_USE_ORIGIN: RPATH $ORIGIN, not the workspace's path).
A slot is one set of options (architectures, generator), so switching option sets does not thrash it.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from strata_bench.engine.tree import LlamaTree, content_hash, file_digests
from strata_bench.errors import InputError

DEFAULT_ARCH = "90"  # the H200's, used when no GPU answers
_ARCH = re.compile(r"^\d{2,3}[af]?(?:-real|-virtual)?$")
CUDA_HOMES = ("/usr/local/cuda/bin",)


@dataclass(frozen=True)
class Tools:
    """The programs a build runs, with the versions that enter the cache key."""

    cmake: str
    nvcc: str
    ninja: str | None  # None: CMake's Unix Makefiles
    versions: tuple[tuple[str, str], ...] = ()

    @property
    def generator(self) -> str:
        return "Ninja" if self.ninja else "Unix Makefiles"


@dataclass(frozen=True)
class BuildPlan:
    """Everything a build does, decided before it starts (`engine build --dry-run` prints it)."""

    tree: Path
    key: str
    arch: str
    targets: tuple[str, ...]
    tools: Tools
    cache_root: Path
    jobs: int
    digests_count: int

    @property
    def entry(self) -> Path:
        return self.cache_root / self.key

    @property
    def bin_dir(self) -> Path:
        return self.entry / "bin"

    @property
    def slot(self) -> Path:
        arch = self.arch.replace(",", "_").replace(";", "_")
        return self.cache_root / "work" / f"cuda-{arch}-{'ninja' if self.tools.ninja else 'make'}"

    @property
    def cached(self) -> bool:
        return (self.entry / "build.json").is_file()

    def configure_argv(self) -> list[str]:
        src, build = self.slot / "src", self.slot / "build"
        argv = [self.tools.cmake, "-S", str(src), "-B", str(build), "-G", self.tools.generator]
        if self.tools.ninja:
            argv.append(f"-DCMAKE_MAKE_PROGRAM={self.tools.ninja}")
        return argv + [f"-D{k}={v}" for k, v in cmake_options(self.arch, self.tools.nvcc)]

    def build_argv(self) -> list[str]:
        return [self.tools.cmake, "--build", str(self.slot / "build"), "--config", "Release", "-j", str(self.jobs),
                "--target", *self.targets]

    def describe(self) -> dict:
        return {"tree": str(self.tree), "key": self.key, "arch": self.arch, "targets": list(self.targets),
                "generator": self.tools.generator, "cached": self.cached, "bin": str(self.bin_dir),
                "workspace": str(self.slot), "files_hashed": self.digests_count, "jobs": self.jobs,
                "tools": dict(self.tools.versions), "configure": self.configure_argv(), "build": self.build_argv()}


def cmake_options(arch: str, nvcc: str) -> list[tuple[str, str]]:
    """The -D options of every build (they are part of the cache key)."""
    return [("CMAKE_BUILD_TYPE", "Release"), ("GGML_CUDA", "ON"), ("CMAKE_CUDA_ARCHITECTURES", arch.replace(",", ";")),
            ("CMAKE_CUDA_COMPILER", nvcc), ("GGML_NATIVE", "OFF"), ("BUILD_SHARED_LIBS", "ON"),
            # each executable finds the libraries beside it, so a copy of bin/ is self-contained
            ("CMAKE_BUILD_RPATH_USE_ORIGIN", "ON"),
            # nothing downloaded or linked that an offline GPU host may lack: no curl or OpenSSL for model
            # downloads, no web UI for the server (its assets would be fetched at build time)
            ("LLAMA_CURL", "OFF"), ("LLAMA_OPENSSL", "OFF"), ("LLAMA_USE_PREBUILT_UI", "OFF"),
            ("LLAMA_BUILD_UI", "OFF"), ("LLAMA_BUILD_TESTS", "OFF"),
            # the executables link where no CUDA driver is installed (a GPU-less build host, whose engines are
            # carried to the GPU host): libggml-cuda needs libcuda.so.1, which only the GPU host has; llama.cpp's
            # own CUDA container build passes the same flag
            ("CMAKE_EXE_LINKER_FLAGS", "-Wl,--allow-shlib-undefined")]


def check_arch(arch: str | None) -> str:
    """`--arch 90` or `90,100a` -> the CMake value; None: the local GPU's, else 90."""
    if arch is None:
        return local_arch() or DEFAULT_ARCH
    parts = [a.strip() for a in arch.replace(";", ",").split(",")]
    bad = [a for a in parts if not _ARCH.match(a)]
    if bad or not parts:
        raise InputError(f"--arch must be CUDA architectures like 90 or 90,120a, got {arch!r}")
    return ",".join(parts)


def local_arch() -> str | None:
    """The first GPU's compute capability as CMake writes it (9.0 -> 90), or None without a GPU."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    first = out.strip().splitlines()[:1]
    return first[0].strip().replace(".", "") if first and re.fullmatch(r"\d+\.\d+", first[0].strip()) else None


def find_tools(env: dict[str, str] | None = None) -> Tools:
    """cmake, nvcc ($CUDACXX, PATH, $CUDA_PATH/bin, /usr/local/cuda/bin) and ninja; InputError naming a
    missing one."""
    env = dict(os.environ if env is None else env)
    path = env.get("PATH", "")
    cmake = shutil.which("cmake", path=path)
    if cmake is None:
        raise InputError("cmake not found on PATH: install CMake 3.18 or later (pip install cmake works)")
    nvcc = env.get("CUDACXX") if env.get("CUDACXX") and os.access(env["CUDACXX"], os.X_OK) else None
    homes = [path] + [str(Path(env[k]) / "bin") for k in ("CUDA_PATH", "CUDA_HOME") if env.get(k)] + list(CUDA_HOMES)
    nvcc = nvcc or next((found for p in homes if (found := shutil.which("nvcc", path=p))), None)
    if nvcc is None:
        raise InputError("nvcc not found (looked in $CUDACXX, PATH, $CUDA_PATH/bin, /usr/local/cuda/bin): "
                         "install the CUDA toolkit or set CUDACXX")
    _require_cublas(Path(nvcc))
    ninja = shutil.which("ninja", path=path)
    versions = (("cmake", _first_line([cmake, "--version"])), ("nvcc", _last_line([nvcc, "--version"])))
    return Tools(cmake, nvcc, ninja, versions)


def _require_cublas(nvcc: Path) -> None:
    """GGML_CUDA links cuBLAS (CMake's CUDA::cublas): a toolkit without it fails at configure, after a
    minute of compiler checks, with a message about an imported target; say so first, in one line."""
    toolkit = _toolkit_root(nvcc)
    places = [toolkit / "include", *sorted(toolkit.glob("targets/*/include"))]
    if not any((p / "cublas_v2.h").is_file() for p in places):
        raise InputError(f"the CUDA toolkit at {toolkit} has no cuBLAS (include/cublas_v2.h), which GGML_CUDA "
                         f"links: install its cuBLAS, or set CUDACXX to a toolkit that has it")


def _toolkit_root(nvcc: Path) -> Path:
    """The toolkit nvcc belongs to: its own `TOP` (nvcc --dryrun), which sees through a wrapper script
    such as /usr/local/bin/nvcc; else the folder above nvcc's."""
    m = re.search(r"^#\$ TOP=(.+)$", _output([str(nvcc), "--dryrun", "-c", "-x", "cu", os.devnull, "-o", os.devnull],
                                           stderr=True), re.MULTILINE)
    return Path(m.group(1).strip()).resolve() if m else nvcc.resolve().parent.parent


def _first_line(argv: Sequence[str]) -> str:
    return (_output(argv).strip().splitlines() or [""])[0]


def _last_line(argv: Sequence[str]) -> str:
    return (_output(argv).strip().splitlines() or [""])[-1]


def _output(argv: Sequence[str], stderr: bool = False) -> str:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout + (done.stderr if stderr else "")


def cache_root(env: dict[str, str] | None = None) -> Path:
    """$STRATA_CACHE_DIR/engines, else ~/.cache/strata-bench/engines."""
    env = dict(os.environ if env is None else env)
    base = Path(env["STRATA_CACHE_DIR"]) if env.get("STRATA_CACHE_DIR") else Path.home() / ".cache" / "strata-bench"
    return base / "engines"


def cache_key(digests: dict[str, str], arch: str, targets: Sequence[str], tools: Tools) -> str:
    """sha256 of the tree's build files, the options, the targets and the tools' versions (24 hex digits)."""
    body = {"tree": content_hash(digests), "arch": arch, "targets": list(targets), "generator": tools.generator,
            "options": cmake_options(arch, "nvcc"), "tools": dict(tools.versions)}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]


def make_plan(tree: LlamaTree, arch: str | None = None, tools: Tools | None = None, root: Path | None = None,
              jobs: int | None = None, digests: dict[str, str] | None = None) -> BuildPlan:
    """The plan for `tree`: tools found, architecture checked, targets chosen, key computed."""
    arch = check_arch(arch)
    targets = tree.targets()
    tools = tools or find_tools()
    digests = file_digests(tree.root) if digests is None else digests
    jobs = jobs or os.cpu_count() or 1
    return BuildPlan(tree.root, cache_key(digests, arch, targets, tools), arch, targets, tools,
                     root or cache_root(), jobs, len(digests))
