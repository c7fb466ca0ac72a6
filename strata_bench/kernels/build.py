"""Build: kernels_src -> cubin through NVRTC (CuPy's binding), with recorded options and our own cache.

Why not cupy.RawModule: it appends `-ftz=true` after the caller's options (so FTZ cannot be chosen), its
cache ignores included headers, and its arch lookup needs a device. Calling NVRTC directly fixes all three
and also compiles for named architectures on a host with no GPU.

The cache key is sha256 over: every byte of every file in kernels_src/ (via `sources.kernels_src_hash`),
the source name, the name expressions, the options, the NVRTC version and the architecture.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from strata_bench.errors import CompileError, InputError
from strata_bench.kernels.sources import kernels_dir, kernels_src_hash

# Deliberate numerics: IEEE division and sqrt, denormals kept (no FTZ), FMA contraction on (as production
# builds have it; the arithmetic contracts in kernels_src are written for it). NVRTC's own cache ignores
# -ftz in its key, hence --no-cache.
BASE_OPTIONS: tuple[str, ...] = (
    "-std=c++17", "-ftz=false", "-prec-div=true", "-prec-sqrt=true", "-fmad=true", "--no-cache",
)
SUPPORTED_ARCHS = (75, 80, 86, 89, 90, 100, 120)


@dataclass(frozen=True)
class CompiledSource:
    source: str  # path relative to kernels_src
    arch: str  # "sm_90"
    options: tuple[str, ...]
    cubin: bytes = field(repr=False)
    lowered: dict[str, str] = field(repr=False)  # name expression -> mangled symbol
    log: str = field(repr=False)
    cache_hit: bool = False


@dataclass(frozen=True)
class KernelResources:
    kernel: str
    registers: int
    spill_stores: int
    spill_loads: int
    shared_bytes: int
    stack_bytes: int


def nvrtc_version() -> tuple[int, int]:
    from cupy_backends.cuda.libs import nvrtc

    return tuple(nvrtc.getVersion())  # type: ignore[return-value]


def cuda_include_dirs() -> list[str]:
    """Toolkit headers (cuda_fp16.h, mma.h) for NVRTC: $CUDA_PATH, /usr/local/cuda, then pip's nvidia wheels.

    A full toolkit comes first because the pip cudart headers lack crt/mma.h (wmma)."""
    found: list[str] = []
    for root in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and Path(root, "include", "cuda_fp16.h").exists():
            found.append(str(Path(root, "include")))
    try:
        import nvidia  # namespace package of the pip CUDA wheels

        for base in getattr(nvidia, "__path__", []):
            for inc in sorted(Path(base).glob("cu*/include")):
                if (inc / "cuda_fp16.h").exists():
                    found.append(str(inc))
    except ImportError:
        pass
    return list(dict.fromkeys(found))


def compile_options(arch: str, extra: Sequence[str] = (), root: Path | None = None) -> tuple[str, ...]:
    """The full, recorded option list for one compile (root: the kernel directory, kernels_src by default)."""
    root = kernels_dir() if root is None else Path(root).resolve()
    includes = [f"-I{root}"] + ([f"-I{kernels_dir()}"] if root != kernels_dir() else [])
    includes += [f"-I{d}" for d in cuda_include_dirs()]
    # The hash define makes every cache (ours, CuPy's, NVRTC's) see a header edit as a new source.
    return (f"--gpu-architecture={arch}", *BASE_OPTIONS, f"-DSTRATA_SRC_HASH=0x{kernels_src_hash(root)[:15]}",
            "-Xptxas=-v", *includes, *extra)


def normalize_arch(arch: str | int) -> str:
    text = str(arch).strip().lower().removeprefix("sm_").removeprefix("compute_")
    if not text.isdigit():
        raise InputError(f"bad architecture {arch!r}: expected e.g. 90 or sm_90")
    if int(text) < 75:
        raise InputError(f"architecture sm_{text} is not supported by CUDA 13 NVRTC (sm_75 and newer)")
    return f"sm_{text}"


def cache_dir() -> Path:
    return Path(os.environ.get("STRATA_CACHE_DIR", Path.home() / ".cache" / "strata-bench" / "cubin"))


def _cache_key(source: str, exprs: Sequence[str], options: Sequence[str], version: tuple[int, int],
               root: Path) -> str:
    # Include paths name this machine's folders; they do not change the code, so they stay out of the key.
    portable = [o for o in options if not o.startswith("-I")]
    blob = json.dumps([kernels_src_hash(root), kernels_src_hash(), source, list(exprs), portable, list(version)])
    return hashlib.sha256(blob.encode()).hexdigest()


def compile_source(source: str, name_expressions: Sequence[str], arch: str = "sm_90",
                   extra_options: Sequence[str] = (), use_cache: bool = True,
                   root: Path | None = None) -> CompiledSource:
    """Compile one kernel file (relative to root, kernels_src by default) for one architecture;
    raise CompileError with the NVRTC log."""
    arch = normalize_arch(arch)
    root = kernels_dir() if root is None else Path(root).resolve()
    path = root / source
    if not path.is_file() and (kernels_dir() / source).is_file():
        # A user family may list built-in sources beside its own (a new variant next to the old one).
        root, path = kernels_dir(), kernels_dir() / source
    if not path.is_file():
        raise InputError(f"kernel source not found: {source} (in {root})")
    options = compile_options(arch, extra_options, root)
    version = nvrtc_version()
    key = _cache_key(source, name_expressions, options, version, root)
    cached = _cache_load(key, source, arch, options) if use_cache else None
    if cached is not None:
        return cached
    compiled = _nvrtc_compile(path, source, name_expressions, arch, options)
    if use_cache:
        _cache_store(key, compiled)
    return compiled


def _nvrtc_compile(path: Path, source: str, exprs: Sequence[str], arch: str,
                   options: tuple[str, ...]) -> CompiledSource:
    from cupy_backends.cuda.libs import nvrtc

    prog = nvrtc.createProgram(path.read_text(encoding="utf-8"), source, [], [])
    try:
        for expr in exprs:
            nvrtc.addNameExpression(prog, expr)
        try:
            nvrtc.compileProgram(prog, list(options))
        except nvrtc.NVRTCError:
            raise CompileError(f"compile failed: {source} for {arch}\n{nvrtc.getProgramLog(prog).strip()}") from None
        lowered = {expr: nvrtc.getLoweredName(prog, expr) for expr in exprs}
        return CompiledSource(source, arch, options, bytes(nvrtc.getCUBIN(prog)), lowered,
                              nvrtc.getProgramLog(prog))
    finally:
        nvrtc.destroyProgram(prog)


def _cache_load(key: str, source: str, arch: str, options: tuple[str, ...]) -> CompiledSource | None:
    base = cache_dir() / key
    try:
        meta = json.loads(base.with_suffix(".json").read_text())
        cubin = base.with_suffix(".cubin").read_bytes()
    except (OSError, ValueError):
        return None
    if hashlib.sha256(cubin).hexdigest() != meta.get("cubin_sha256"):
        return None  # a torn write: rebuild
    return CompiledSource(source, arch, options, cubin, meta["lowered"], meta["log"], cache_hit=True)


def _cache_store(key: str, compiled: CompiledSource) -> None:
    base = cache_dir() / key
    base.parent.mkdir(parents=True, exist_ok=True)
    for suffix, data in ((".cubin", compiled.cubin),
                         (".json", json.dumps({"lowered": compiled.lowered, "log": compiled.log,
                                               "cubin_sha256": hashlib.sha256(compiled.cubin).hexdigest()}).encode())):
        tmp = base.with_suffix(suffix + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, base.with_suffix(suffix))


_PTXAS_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def parse_resources(log: str, lowered: dict[str, str]) -> list[KernelResources]:
    """Registers, spills, stack and static shared memory per kernel, from the -Xptxas=-v log."""
    names = {v: k for k, v in lowered.items()}
    out: list[KernelResources] = []
    current, frame = None, (0, 0, 0)
    for line in log.splitlines():
        if m := _PTXAS_ENTRY.search(line):
            current = names.get(m.group(1), m.group(1))
        elif (m := _PTXAS_FRAME.search(line)) and current:
            frame = tuple(int(x) for x in m.groups())
        elif (m := _PTXAS_USED.search(line)) and current:
            smem = int(m.group(2) or 0)
            out.append(KernelResources(current, int(m.group(1)), frame[1], frame[2], smem, frame[0]))
            current = None
    return out


class Kernels:
    """Loaded modules of one family on one device: `get(name_expression)` -> cupy Function."""

    def __init__(self, compiled: Iterable[CompiledSource]):
        from cupy.cuda import function

        self.compiled = list(compiled)
        self._functions: dict[str, Any] = {}
        self._modules = []
        for comp in self.compiled:
            module = function.Module()
            module.load(comp.cubin)
            self._modules.append(module)  # keep alive: functions borrow the module
            for expr, symbol in comp.lowered.items():
                self._functions[expr] = module.get_function(symbol)

    def get(self, expr: str):
        try:
            return self._functions[expr]
        except KeyError:
            raise InputError(f"kernel {expr!r} was not compiled (missing from name_expressions)") from None


def device_arch(device_id: int) -> str:
    from cupy_backends.cuda.api import runtime

    props = runtime.getDeviceProperties(device_id)
    return f"sm_{props['major']}{props['minor']}"


_LOADED: dict[tuple[str, int], Kernels] = {}


def load_kernels(family: Any, device_id: int) -> Kernels:
    """Compile (or fetch from cache) every source of a family for this device's arch and load it there."""
    key = (family.name, device_id)
    if key not in _LOADED:
        import cupy

        arch = device_arch(device_id)
        with cupy.cuda.Device(device_id):
            _LOADED[key] = Kernels(compile_family(family, arch))
    return _LOADED[key]


def compile_family(family: Any, arch: str, use_cache: bool = True) -> list[CompiledSource]:
    """Every source of a family; a user family may set `kernels_root` (its --kernels DIR)."""
    root = family.kernels_root
    return [compile_source(src, family.name_expressions(src), arch, use_cache=use_cache, root=root)
            for src in family.sources]


def recorded_options(arch: str = "sm_90") -> list[str]:
    """The options as recorded in results (include dirs made relative where they are ours)."""
    out = []
    for opt in compile_options(arch):
        if opt.startswith("-I") and Path(opt[2:]) == kernels_dir():
            opt = "-I<kernels_src>"
        elif opt.startswith("-I"):
            opt = "-I<cuda include>"
        out.append(opt)
    return out
