"""nvcc as a second compiler: a variant's `.cu` built as an engine builds it (host code, the C and C++
standard headers, the engine's flags) into one cubin per architecture, `nvcc -cubin -arch=sm_XX`.

NVRTC cannot compile such a file (no standard headers, no host code), which is why an engine's own
sources need nvcc. The exact command and `nvcc --version` are recorded; the output is cached under
$STRATA_CACHE_DIR (written to a temporary name, then renamed, so a failed or killed compile leaves
nothing half-written there).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from strata_bench.errors import CompileError, InputError
from strata_bench.kernels import cubin
from strata_bench.kernels.cache_write import replace_file

ERROR_LINES = 12  # lines of nvcc's output a compile error shows


class NvccMissing(InputError):
    """A variant asks for nvcc and this host has none (exit 2; the CLI makes it 77 for a GPU run)."""


@dataclass(frozen=True)
class NvccOutput:
    """One nvcc build: the cubin, the command as recorded, nvcc's version and its log (ptxas -v)."""

    cubin: bytes = field(repr=False)
    command: tuple[str, ...]
    version: str
    log: str = field(repr=False)
    cache_hit: bool = False


def nvcc_roots() -> list[str]:
    """Toolkits to look in: $CUDA_PATH and $CUDA_HOME where set (then they alone name it, as for NVRTC's
    headers), else PATH's nvcc and /usr/local/cuda."""
    return [r for r in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME")) if r]


def find_nvcc() -> str:
    """The nvcc this host runs; NvccMissing naming where it looked."""
    named = nvcc_roots()
    places = [str(Path(r, "bin", "nvcc")) for r in named]
    if not named:
        on_path = shutil.which("nvcc")
        places = ([on_path] if on_path else []) + ["/usr/local/cuda/bin/nvcc"]
    for place in places:
        if Path(place).is_file() and os.access(place, os.X_OK):
            return place
    looked = ", ".join(places) if named else "PATH, /usr/local/cuda/bin"
    raise NvccMissing(f"nvcc not found (looked in {looked}; set CUDA_PATH to a CUDA toolkit)")


@functools.lru_cache(maxsize=None)
def nvcc_version(nvcc: str) -> str:
    """The release and build lines of `nvcc --version` ("Cuda compilation tools, release 13.0, V13.0.88;
    Build cuda_13.0.r13.0/compiler.36424714_0")."""
    done = subprocess.run([nvcc, "--version"], capture_output=True, text=True)
    lines = [ln.strip() for ln in done.stdout.splitlines() if ln.strip()]
    kept = [ln for ln in lines if ln.startswith(("Cuda compilation tools", "Build "))]
    return "; ".join(kept or lines[-1:]) or f"unknown (nvcc --version exited {done.returncode})"


def command(nvcc: str, source: Path, arch: str, options: Sequence[str], output: str = "<cubin>") -> list[str]:
    """The nvcc command line of one cubin: the variant's options (flags, -I, -D) as given, then -Xptxas=-v
    for the resources table (it changes no code)."""
    return [nvcc, "-cubin", f"-arch={arch}", *options, "-Xptxas=-v", "-o", output, str(source)]


def nvcc_cache_key(source: Path, options: Sequence[str], version: str, arch: str, inputs_hash: str = "") -> str:
    """The cache key of an nvcc build: the source's bytes, `inputs_hash` (the caller's hash of the headers
    it can see), the options, nvcc's version and the architecture. The include-closure key being built
    in strata_bench/kernels/closure.py (every file a compile reads, from nvcc -M) will replace this."""
    blob = json.dumps([hashlib.sha256(source.read_bytes()).hexdigest(), inputs_hash, list(options), version, arch])
    return "nvcc-" + hashlib.sha256(blob.encode()).hexdigest()


def compile_cubin(source: Path, arch: str, options: Sequence[str], cache: Path | None, inputs_hash: str = "",
                  label: str = "") -> NvccOutput:
    """Build (or fetch from `cache`, None: no cache) the cubin of `source` for `arch` ("sm_90").
    CompileError with nvcc's first lines for a source that does not compile; NvccMissing without nvcc."""
    nvcc = find_nvcc()
    version = nvcc_version(nvcc)
    recorded = tuple(command(nvcc, source, arch, options))  # exact, but for the temporary output's name
    key = nvcc_cache_key(source, options, version, arch, inputs_hash)
    if cache is not None and (hit := _load(cache, key, arch)) is not None:
        return hit
    with tempfile.TemporaryDirectory(prefix="strata-nvcc-") as tmp:
        out = Path(tmp, "out.cubin")
        done = subprocess.run(command(nvcc, source, arch, options, str(out)), capture_output=True, text=True)
        log = (done.stdout + done.stderr).strip()
        if done.returncode != 0 or not out.is_file():
            head = "\n".join(log.splitlines()[:ERROR_LINES])
            raise CompileError(f"nvcc failed: {label or source} for {arch} (exit {done.returncode})\n{head}")
        built = NvccOutput(out.read_bytes(), recorded, version, log)
    if not cubin.built_for(built.cubin, arch):  # never cached, never used: another arch would load and fault
        raise CompileError(f"nvcc built {label or source} for another architecture than {arch} "
                           f"(sm_{_arch_of(built.cubin)}): an option overrides -arch")
    if cache is not None:
        _store(cache, key, built)
    return built


def _arch_of(data: bytes) -> str:
    try:
        return str(cubin.elf_arch(data))
    except cubin.CubinError:
        return "?"


def _load(cache: Path, key: str, arch: str) -> NvccOutput | None:
    try:
        meta = json.loads((cache / f"{key}.json").read_text())
        image = (cache / f"{key}.cubin").read_bytes()
    except (OSError, ValueError):
        return None
    if hashlib.sha256(image).hexdigest() != meta.get("cubin_sha256") or not cubin.built_for(image, arch):
        return None  # a torn write, or an entry of another architecture: build again
    return NvccOutput(image, tuple(meta["command"]), meta["version"], meta["log"], cache_hit=True)


def _store(cache: Path, key: str, built: NvccOutput) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    meta = {"command": list(built.command), "version": built.version, "log": built.log,
            "cubin_sha256": hashlib.sha256(built.cubin).hexdigest()}
    # The cubin first, its metadata (with the cubin's hash) last: a reader sees both or a miss.
    for name, data in ((f"{key}.cubin", built.cubin), (f"{key}.json", json.dumps(meta).encode())):
        replace_file(cache / name, data)  # a temporary name per call: compile's threads share one pid
