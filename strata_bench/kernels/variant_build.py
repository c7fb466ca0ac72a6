"""How one TOML variant's source becomes a cubin: NVRTC (the default, as built-in kernels), nvcc (an
engine's own `.cu` with host code and standard headers) or a prebuilt cubin/fatbin (`binary = ...`).

Whatever the compiler, the result is a build.CompiledSource (cubin + name expression -> symbol), so
loading and launching do not change; and every kernel a variant launches is then checked against the
cubin's parameter table (toml_abi/abi_check.py), on the CPU, before anything runs.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from strata_bench.errors import InputError
from strata_bench.files import read_regular
from strata_bench.kernels import build, cubin, cubin_symbols, nvcc

COMPILERS = ("nvrtc", "nvcc")
MAX_BINARY_BYTES = 1 << 30  # a prebuilt cubin/fatbin is read whole: past this it is not one a variant needs

# name expression -> (cubin kernel, its symbol) -> None; raises InputError naming the TOML key.
KernelCheck = Callable[[str, cubin.Kernel], None]


@dataclass(frozen=True)
class SourceBuild:
    """A TOML variant's build: `compiler` "nvrtc" or "nvcc" over `path` (its .cu), or "binary" with
    `path` a prebuilt cubin/fatbin. `options` are NVRTC's extra options or nvcc's flags, -I and -D;
    `where` names the variant in messages ("FILE: variant 'x'"); `inputs_hash` covers every header the
    source can see (nvcc's cache key); `check` is run on every kernel looked up."""

    compiler: str
    path: Path
    where: str
    options: tuple[str, ...] = ()
    inputs_hash: str = ""
    check: KernelCheck | None = field(default=None, compare=False, repr=False)
    origin: tuple[tuple[str, str], ...] = ()  # what results record of where the source came from (a ggml tree)
    # Options known only when it is built (ggml: a cuBLAS include folder the toolkit may lack), so a
    # variant can be listed and checked on a host that could not build it.
    late_options: Callable[[], tuple[str, ...]] | None = field(default=None, compare=False, repr=False)
    # NVRTC: -I options searched before every other folder, known when it is built (ggml: its stub headers,
    # written into the cache, which must shadow a toolkit's host headers).
    first_options: Callable[[], tuple[str, ...]] | None = field(default=None, compare=False, repr=False)
    # NVRTC: one program for every kernel, as nvcc (ggml's host code instantiates every kernel of its file,
    # so each program would build them all).
    whole: bool = False
    # nvcc or a binary: the name expression as its demangled symbol spells it, where the expression leaves
    # out defaulted template arguments NVRTC would fill in (ggml: spelling.complete); None: as declared.
    symbol_name: Callable[[str], str] | None = field(default=None, compare=False, repr=False)

    def build_options(self) -> tuple[str, ...]:
        return (*self.options, *(self.late_options() if self.late_options is not None else ()))

    def leading_options(self) -> tuple[str, ...]:
        return self.first_options() if self.first_options is not None else ()

    @property
    def one_program(self) -> bool:
        """nvcc builds the whole translation unit at once (and a binary is one file): never split it into
        NVRTC-sized programs; nor an NVRTC build marked `whole`."""
        return self.compiler != "nvrtc" or self.whole

    def compile(self, unit: str, exprs: Sequence[str], arch: str, use_cache: bool = True) -> build.CompiledSource:
        """compile_build of this variant's source: the one way build.compile_unit reaches a variant's build,
        so build.py need not import this module."""
        return compile_build(self, unit, exprs, arch, use_cache)

    def record(self, arch: str) -> dict[str, Any]:
        """What provenance keeps of this build for `arch`: the compiler, its version and the exact command
        (nvcc), the options (NVRTC), or the binary's sha256."""
        if self.compiler == "binary":
            data = read_regular(self.path, _binary_name(self), MAX_BINARY_BYTES)
            return {"compiler": "binary", "binary": str(self.path), "sha256": hashlib.sha256(data).hexdigest()}
        if self.compiler == "nvcc":
            try:
                tool = nvcc.find_nvcc()
            except nvcc.NvccMissing as exc:
                return {"compiler": "nvcc", "error": str(exc)}
            return {"compiler": "nvcc", "version": nvcc.nvcc_version(tool),
                    "command": list(nvcc.command(tool, self.path, arch, self._recorded_options())),
                    **dict(self.origin)}
        try:
            options = list(build.compile_options(arch, self.build_options(), first=self.leading_options()))
        except (InputError, OSError) as exc:  # recorded, not raised: provenance never fails a run
            options = [*self.options, f"<{exc}>"]
        return {"compiler": "nvrtc", "options": options, **dict(self.origin)}

    def _recorded_options(self) -> tuple[str, ...]:
        try:
            return self.build_options()
        except InputError as exc:  # recorded, not raised: provenance never fails a run
            return (*self.options, f"<{exc}>")


def compile_build(spec: SourceBuild, unit: str, exprs: Sequence[str], arch: str,
                  use_cache: bool = True) -> build.CompiledSource:
    """The cubin of one variant source for `arch`, its kernels found by their name expressions and
    checked (spec.check); `unit` is the key the family knows the source by."""
    arch = build.normalize_arch(arch)
    if spec.compiler == "nvrtc":
        compiled = replace(build.compile_source(str(spec.path), exprs, arch, spec.build_options(), use_cache,
                                                first=spec.leading_options()), source=unit)
        image = cubin.read_elf(compiled.cubin)
    else:
        compiled, image = _foreign(spec, unit, exprs, arch, use_cache)
    if spec.check is not None:
        for expr in exprs:
            spec.check(expr, image.kernels[compiled.lowered[expr]])
    return compiled


def _foreign(spec: SourceBuild, unit: str, exprs: Sequence[str], arch: str,
             use_cache: bool) -> tuple[build.CompiledSource, cubin.Cubin]:
    """An nvcc build or a prebuilt binary: the ELF for `arch`, and each name expression's symbol found
    in it by demangled name."""
    number = int(arch.removeprefix("sm_"))
    if spec.compiler == "binary":
        what = _binary_name(spec)
        elf = cubin.elf_for_arch(read_regular(spec.path, what, MAX_BINARY_BYTES), number, what)
        options, log, hit = (f"binary={spec.path}",), "", False
    else:
        what = f"{spec.where} ({spec.path})"
        built = nvcc.compile_cubin(spec.path, arch, spec.build_options(), build.cache_dir() if use_cache else None,
                                   spec.inputs_hash, label=what)
        elf, options, log, hit = built.cubin, built.command, built.log, built.cache_hit
    with cubin.named(what):
        image = cubin.read_elf(elf)
    names = cubin_symbols.demangle(image.kernels)
    spelled = spec.symbol_name or (lambda e: e)
    lowered = {e: cubin_symbols.find_kernel(spelled(e), image.kernels, f"{spec.where}: kernel", names)
               for e in exprs}
    return build.CompiledSource(unit, arch, tuple(options), elf, lowered, log, cache_hit=hit), image


def _binary_name(spec: SourceBuild) -> str:
    return f"{spec.where}: binary {spec.path.name}"


def source_build(family: Any, source: str) -> SourceBuild | None:
    """The SourceBuild a TOML variant registered for `source` (Family.source_build), None for a family's
    own sources (compiled by build.compile_source)."""
    hook = getattr(family, "source_build", None)
    return hook(source) if hook is not None else None


def builds_of(families: Mapping[str, Any]) -> list[tuple[str, str, SourceBuild]]:
    """(family, source, build) of every TOML variant source the families hold."""
    return [(name, src, spec) for name, fam in families.items() for src in getattr(fam, "sources", ())
            if (spec := source_build(fam, src)) is not None]
