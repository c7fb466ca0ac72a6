"""Build: kernels_src -> cubin through NVRTC (CuPy's binding), with recorded options and our own cache.

Why not cupy.RawModule: it appends `-ftz=true` after the caller's options (so FTZ cannot be chosen), its
cache ignores included headers, and its arch lookup needs a device. Calling NVRTC directly fixes all three
and also compiles for named architectures on a host with no GPU.

The cache key (closure.cache_key) is sha256 over every byte the compile reads (the source's include
closure: the source and every header its includes reach through the compile's own include path, -I
folders a family or a TOML variant adds included), the options (the architecture among them), the
name expressions and the NVRTC version. An entry is written under a temporary name and renamed, the
metadata (with the cubin's sha256) last, so a reader never takes a half-written cubin.
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
from strata_bench.kernels import closure, nvrtc
from strata_bench.kernels.cache_write import replace_file
from strata_bench.kernels import cubin as cubin_module
from strata_bench.kernels.sources import is_builtin_source, kernels_dir, kernels_src_hash

# Deliberate numerics: IEEE division and sqrt, denormals kept (no FTZ), FMA contraction on (as production
# builds have it; the arithmetic contracts in kernels_src are written for it). NVRTC's own cache ignores
# -ftz in its key, hence --no-cache.
BASE_OPTIONS: tuple[str, ...] = (
    "-std=c++17", "-ftz=false", "-prec-div=true", "-prec-sqrt=true", "-fmad=true", "--no-cache",
)


# The float options a variant may decide (flags = ["-use_fast_math"] or ["-ftz=true"]): NVRTC lets an explicit
# -ftz=false beat -use_fast_math whatever their order, so an appended -use_fast_math alone changed nothing
# while BASE_OPTIONS named them. A variant's own option replaces the base one; -use_fast_math (which implies
# -ftz=true -prec-div=false -prec-sqrt=false -fmad=true) replaces every one the variant does not name.
FLOAT_OPTIONS = ("ftz", "prec-div", "prec-sqrt", "fmad")
FAST_MATH = ("-use_fast_math", "--use_fast_math")


def _float_option(option: str) -> str | None:
    name = option.lstrip("-").split("=", 1)[0]
    return name if option.startswith("-") and name in FLOAT_OPTIONS else None


def base_options(extra: Sequence[str] = ()) -> tuple[str, ...]:
    """BASE_OPTIONS less the float options `extra` decides itself (see FLOAT_OPTIONS)."""
    named = {_float_option(o) for o in extra} - {None}
    fast = any(o in FAST_MATH for o in extra)
    return tuple(o for o in BASE_OPTIONS
                 if (key := _float_option(o)) is None or (key not in named and not fast))


class ToolkitHeadersMissing(InputError):
    """A kernel needs a CUDA toolkit header (crt/mma.h for wmma) that no include folder has."""


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
    # Named barriers (__syncthreads, bar.sync) ptxas counted; None where its log does not say (an older
    # ptxas, a build without the log): the sanitize scope then keeps the kernel (gpu/sanitize_scope.py).
    barriers: int | None = None


def nvrtc_version() -> tuple[int, int]:
    return nvrtc.version()


def toolkit_roots() -> list[str]:
    """Where a CUDA toolkit may be installed: $CUDA_PATH and $CUDA_HOME where set (then they alone name it,
    so a user can choose or rule out a toolkit), else /usr/local/cuda."""
    named = [r for r in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME")) if r]
    return named or ["/usr/local/cuda"]


def wheel_include_dirs() -> list[str]:
    """The include folders of pip's NVIDIA wheels (nvidia/cu13/include, nvidia/cuda_runtime/include)."""
    try:
        import nvidia  # namespace package of the pip CUDA wheels
    except ImportError:
        return []
    return [str(inc) for base in getattr(nvidia, "__path__", []) for inc in sorted(Path(base).glob("*/include"))
            if (inc / "cuda_fp16.h").exists()]


def cuda_include_dirs() -> list[str]:
    """Toolkit headers (cuda_fp16.h, mma.h) for NVRTC: a CUDA toolkit first, then pip's nvidia wheels.

    A full toolkit comes first because the pip cudart headers lack crt/mma.h (wmma)."""
    found = [str(Path(r, "include")) for r in toolkit_roots() if Path(r, "include", "cuda_fp16.h").exists()]
    return list(dict.fromkeys(found + wheel_include_dirs()))


# A system header (angle include) -> the files it needs; only those NVRTC does not build in are listed.
# pip's cudart wheel ships mma.h without the crt/mma.h it includes, so wmma needs a full toolkit.
TOOLKIT_HEADERS: dict[str, tuple[str, ...]] = {"mma.h": ("mma.h", "crt/mma.h"), "cuda_fp16.h": ("cuda_fp16.h",)}
_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def system_includes(path: Path, search: Sequence[Path]) -> set[str]:
    """Every angle-bracket include reached from `path` through its quoted includes (found in `search`)."""
    seen, angle, todo = set(), set(), [path]
    while todo:
        current = todo.pop()
        if current in seen or not current.is_file():
            continue
        seen.add(current)
        for kind, name in _INCLUDE.findall(current.read_text(encoding="utf-8", errors="replace")):
            if kind == "<":
                angle.add(name)
                continue
            todo += [d / name for d in (current.parent, *search) if (d / name).is_file()][:1]
    return angle


def missing_toolkit_headers(path: Path, root: Path | None = None) -> list[str]:
    """The toolkit headers `path` needs that no include folder has (empty: it can compile here)."""
    root = kernels_dir() if root is None else Path(root)
    includes = [Path(d) for d in cuda_include_dirs()]
    needed = [f for h in sorted(system_includes(path, [root, kernels_dir()])) for f in TOOLKIT_HEADERS.get(h, ())]
    return [f for f in needed if not any((d / f).is_file() for d in includes)]


def compile_options(arch: str, extra: Sequence[str] = (), root: Path | None = None,
                    first: Sequence[str] = ()) -> tuple[str, ...]:
    """The full, recorded option list for one compile (root: the kernel directory, kernels_src by default).
    `first`: -I options searched before every other folder (a build's own stub headers, which must shadow
    the toolkit's)."""
    root = kernels_dir() if root is None else Path(root).resolve()
    includes = [*first, f"-I{root}"] + ([f"-I{kernels_dir()}"] if root != kernels_dir() else [])
    includes += [f"-I{d}" for d in cuda_include_dirs()]
    # The hash define makes every cache (ours, CuPy's, NVRTC's) see a header edit as a new source.
    return (f"--gpu-architecture={arch}", *base_options(extra), f"-DSTRATA_SRC_HASH=0x{kernels_src_hash(root)[:15]}",
            "-Xptxas=-v", *includes, *extra)


def normalize_arch(arch: str | int) -> str:
    text = str(arch).strip().lower().removeprefix("sm_").removeprefix("compute_")
    if not text.isdigit():
        raise InputError(f"bad architecture {arch!r}: expected e.g. 90 or sm_90")
    return f"sm_{text}"


def check_arch_supported(arch: str) -> str:
    """`arch` ("sm_90") when the loaded NVRTC lists it; InputError naming the supported ones otherwise."""
    try:
        supported = nvrtc.supported_archs()
    except nvrtc.NvrtcUnavailable as exc:
        raise nvrtc.NvrtcUnavailable(f"cannot check architecture {arch}: {exc}") from None
    number = int(arch.removeprefix("sm_"))
    if number not in supported:
        major, minor = nvrtc.version()
        raise InputError(f"architecture {arch} is not supported by NVRTC {major}.{minor} "
                         f"(supported: {', '.join(str(a) for a in supported)})")
    return arch


def cache_dir() -> Path:
    return Path(os.environ.get("STRATA_CACHE_DIR", Path.home() / ".cache" / "strata-bench" / "cubin"))


def resolve_source(source: str, root: Path | None = None) -> tuple[Path, Path]:
    """(the folder a source compiles from, its path): root/source (root: kernels_src by default), else
    kernels_src/source; the path need not exist."""
    root = kernels_dir() if root is None else Path(root).resolve()
    if not (root / source).is_file() and (kernels_dir() / source).is_file():
        # A user family may list built-in sources beside its own (a new variant next to the old one).
        return kernels_dir(), kernels_dir() / source
    return root, root / source


def compile_source(source: str, name_expressions: Sequence[str], arch: str = "sm_90",
                   extra_options: Sequence[str] = (), use_cache: bool = True,
                   root: Path | None = None, first: Sequence[str] = ()) -> CompiledSource:
    """Compile one kernel file (relative to root, kernels_src by default) for one architecture;
    raise CompileError with the NVRTC log. `first`: -I options searched before all others."""
    arch = normalize_arch(arch)
    root, path = resolve_source(source, root)
    if not path.is_file():
        raise InputError(f"kernel source not found: {source} (in {root})")
    missing = missing_toolkit_headers(path, root)
    if missing:
        raise ToolkitHeadersMissing(f"{source} needs the CUDA toolkit's {', '.join(missing)} (not found under "
                                    f"{', '.join(toolkit_roots()) or '$CUDA_PATH'} or pip's nvidia headers)")
    options = compile_options(arch, extra_options, root, first)
    major, minor = nvrtc_version()
    key = closure.cache_key(closure.scan(path, options, cuda_include_dirs()), options, f"nvrtc {major}.{minor}",
                            name_expressions)
    cached = _cache_load(key, source, arch, options) if use_cache else None
    if cached is not None:
        return cached
    compiled = _nvrtc_compile(path, source, name_expressions, arch, options)
    if use_cache:
        _cache_store(key, compiled)
    return compiled


def _nvrtc_compile(path: Path, source: str, exprs: Sequence[str], arch: str,
                   options: tuple[str, ...]) -> CompiledSource:
    try:
        cubin, lowered, log = nvrtc.compile_program(path.read_text(encoding="utf-8"), source, exprs, options)
    except nvrtc.NvrtcError as exc:
        raise CompileError(f"compile failed: {source} for {arch}\n{(exc.log or str(exc)).strip()}",
                           own=is_builtin_source(path)) from None
    return CompiledSource(source, arch, options, cubin, lowered, log)


def _cache_load(key: str, source: str, arch: str, options: tuple[str, ...]) -> CompiledSource | None:
    base = cache_dir() / key
    try:
        meta = json.loads(base.with_suffix(".json").read_text())
        cubin = base.with_suffix(".cubin").read_bytes()
    except (OSError, ValueError):
        return None
    if hashlib.sha256(cubin).hexdigest() != meta.get("cubin_sha256") or not cubin_module.built_for(cubin, arch):
        return None  # a torn write, or an entry of another architecture: rebuild
    return CompiledSource(source, arch, options, cubin, meta["lowered"], meta["log"], cache_hit=True)


def _cache_store(key: str, compiled: CompiledSource) -> None:
    base = cache_dir() / key
    base.parent.mkdir(parents=True, exist_ok=True)
    # The metadata goes last: it holds the cubin's sha256, so a cubin without it (or torn) is rebuilt.
    for suffix, data in ((".cubin", compiled.cubin),
                         (".json", json.dumps({"lowered": compiled.lowered, "log": compiled.log,
                                               "cubin_sha256": hashlib.sha256(compiled.cubin).hexdigest()}).encode())):
        replace_file(base.with_suffix(suffix), data)


_PTXAS_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")
_PTXAS_BARRIERS = re.compile(r"used (\d+) barriers?")


def parse_resources(log: str, lowered: dict[str, str]) -> list[KernelResources]:
    """Registers, spills, stack, static shared memory and barriers per kernel, from the -Xptxas=-v log."""
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
            bars = _PTXAS_BARRIERS.search(line)
            out.append(KernelResources(current, int(m.group(1)), frame[1], frame[2], smem, frame[0],
                                       int(bars.group(1)) if bars else None))
            current = None
    return out


class Kernels:
    """Loaded modules of one family on one device: `get(name_expression)` -> cupy Function."""

    def __init__(self, compiled: Iterable[CompiledSource]):
        from cupy.cuda import function

        self.compiled = list(compiled)
        self._functions: dict[str, Any] = {}
        self._by_source: dict[str, dict[str, Any]] = {}
        self._modules = []
        for comp in self.compiled:
            module = function.Module()
            module.load(comp.cubin)
            self._modules.append(module)  # keep alive: functions borrow the module
            own = self._by_source.setdefault(comp.source, {})
            for expr, symbol in comp.lowered.items():
                own[expr] = module.get_function(symbol)
                # The first source wins: a TOML variant's source (appended last) that re-declares a
                # built-in kernel's name does not replace the built-in's.
                self._functions.setdefault(expr, own[expr])

    def get(self, expr: str):
        try:
            return self._functions[expr]
        except KeyError:
            raise InputError(f"kernel {expr!r} was not compiled (missing from name_expressions)") from None

    def in_source(self, source: str, expr: str):
        """The kernel `expr` compiled from `source` (a TOML variant's own module)."""
        try:
            return self._by_source[source][expr]
        except KeyError:
            raise InputError(f"kernel {expr!r} was not compiled from {source}") from None


def device_arch(device_id: int) -> str:
    from cupy_backends.cuda.api import runtime

    props = runtime.getDeviceProperties(device_id)
    return f"sm_{props['major']}{props['minor']}"


_LOADED: dict[tuple, Kernels] = {}


def _loaded_key(family: Any, device_id: int) -> tuple:
    """What a family's loaded modules depend on: each run's catalog holds its own copy of a family, with
    the variants that run added (their sources, options and builds), so the name alone is not enough."""
    sources = tuple((s, family.source_options(s), family.source_build(s)) for s in family.sources)
    return family.name, device_id, family.kernels_root, sources


def load_kernels(family: Any, device_id: int) -> Kernels:
    """Compile (or fetch from cache) every source of a family for this device's arch and load it there."""
    key = _loaded_key(family, device_id)
    if key not in _LOADED:
        import cupy

        arch = device_arch(device_id)
        with cupy.cuda.Device(device_id):
            _LOADED[key] = Kernels(compile_family(family, arch))
    return _LOADED[key]


def compile_family(family: Any, arch: str, use_cache: bool = True) -> list[CompiledSource]:
    """Every program of every source of a family; a user family may set `kernels_root` (its --kernels DIR)."""
    root = family.kernels_root
    return [compile_unit(family, src, exprs, arch, use_cache, root)
            for src in family.sources for exprs in programs(family, src)]


def compile_unit(family: Any, source: str, exprs: Sequence[str], arch: str, use_cache: bool = True,
                 root: Path | None = None) -> CompiledSource:
    """One program of a family's source: a TOML variant's source through its own build (NVRTC, nvcc or a
    prebuilt binary, kernels/variant_build.py), any other through NVRTC here."""
    spec = getattr(family, "source_build", lambda _source: None)(source)  # a SourceBuild, or None
    if spec is not None:
        return spec.compile(source, exprs, arch, use_cache)
    return compile_source(source, exprs, arch, family_source_options(family, source), use_cache, root)


PROGRAM_KERNELS = 8  # kernels per NVRTC program at most


def programs(family: Any, source: str) -> list[tuple[str, ...]]:
    """A family's kernels of one source as NVRTC programs of at most PROGRAM_KERNELS name expressions,
    in table order. NVRTC compiles one program on one core, so a source with many template instances
    (mmvq.cu has 55) compiles on several cores at once on a cold cache instead of being the long pole."""
    exprs = tuple(family.name_expressions(source))
    spec = getattr(family, "source_build", lambda _s: None)(source)
    if spec is not None and spec.one_program:
        return [exprs]  # nvcc builds the whole file once, whatever it holds
    return [exprs[i:i + PROGRAM_KERNELS] for i in range(0, len(exprs), PROGRAM_KERNELS)] or [()]


def family_source_options(family: Any, source: str) -> tuple[str, ...]:
    # A TOML variant's include dirs and defines (Family.source_options); a family without the hook has none.
    hook = getattr(family, "source_options", None)
    return tuple(hook(source)) if hook is not None else ()


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
