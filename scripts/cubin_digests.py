"""Print a digest of every built-in kernel's machine code, so two trees can be compared byte for byte.

    PYTHONPATH=$PWD python scripts/cubin_digests.py [--arch 90 --arch 80] [--workers 8] > digests.txt

One line per kernel: `arch family expression sha256`. Lines are keyed by family and name expression, not by
source path, so a tree whose kernels moved to other files still compares line for line (`diff` the two
outputs). Every source is compiled through the project's own build path (compile_source, cache off).

Why not hash the whole cubin: its symbol and section tables hold every kernel of the source, so one
kernel's digest would change when another one did. Each kernel's digest covers the bytes of every ELF
section that belongs to it (named `<prefix>.<mangled name>`: .text, .nv.shared, .nv.constant0, .nv.info,
.rel(a).text ...), with the section names, so code, registers (in .nv.info and the .text flags), shared
memory and parameter layout all show. Module-wide sections that the kernels read (.nv.constant*, .nv.global*,
e.g. the __device__ tables) are hashed once per source and printed as `<module>` lines.
"""
from __future__ import annotations

import argparse
import hashlib
import struct
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))

SHT_NOBITS = 8


def elf_sections(blob: bytes) -> list[tuple[str, int, int, bytes]]:
    """(name, type, flags, bytes) of every section of a little-endian ELF64 file."""
    if blob[:4] != b"\x7fELF" or blob[4] != 2 or blob[5] != 1:
        raise ValueError("not a little-endian ELF64 cubin")
    shoff, = struct.unpack_from("<Q", blob, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", blob, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", blob, shoff + i * shentsize) for i in range(shnum)]
    strtab_off, strtab_size = headers[shstrndx][4], headers[shstrndx][5]
    strtab = blob[strtab_off:strtab_off + strtab_size]
    out = []
    for name_off, kind, flags, _addr, off, size, link, info, _align, _entsize in headers:
        name = strtab[name_off:strtab.index(b"\0", name_off)].decode()
        data = b"" if kind == SHT_NOBITS else blob[off:off + size]
        # NOBITS sections (.nv.shared.*) carry their size only: fold it in, with link/info (register count
        # lives in .text's info field).
        meta = struct.pack("<QII", size, link, info)
        out.append((name, kind, flags, meta + data))
    return out


def kernel_digest(sections, mangled: str) -> str:
    """The kernel's sections, each under its name with the mangled name cut off: a template that gains
    defaulted parameters mangles differently but is the same machine code, and digests the same."""
    digest = hashlib.sha256()
    matched = 0
    for name, kind, flags, data in sections:
        if name.endswith("." + mangled):
            digest.update(name[:-len(mangled)].encode() + b"\0" + struct.pack("<IQ", kind, flags) + data)
            matched += 1
    if not matched:
        raise ValueError(f"no ELF section for {mangled}")
    return digest.hexdigest()


def module_digest(sections, mangled_names) -> str:
    """Module-wide data sections (constant banks and globals not owned by one kernel)."""
    digest = hashlib.sha256()
    for name, kind, flags, data in sections:
        owned = any(name.endswith("." + m) for m in mangled_names)
        if not owned and (name.startswith(".nv.constant") or name.startswith(".nv.global")):
            digest.update(name.encode() + b"\0" + struct.pack("<IQ", kind, flags) + data)
    return digest.hexdigest()


def digest_job(job: tuple[str, str, tuple[str, ...], str]) -> list[str]:
    from strata_bench.kernels.build import compile_source

    family, source, exprs, arch = job
    compiled = compile_source(source, list(exprs), arch, use_cache=False)
    sections = elf_sections(compiled.cubin)
    lines = [f"{arch} {family} {expr} {kernel_digest(sections, compiled.lowered[expr])}" for expr in exprs]
    mangled = list(compiled.lowered.values())
    lines.append(f"{arch} {family} <module:{','.join(exprs[:1])}> {module_digest(sections, mangled)}")
    return lines


def jobs(archs: list[str]) -> list[tuple[str, str, tuple[str, ...], str]]:
    from strata_bench.families import load_builtin_families

    families = load_builtin_families()
    from strata_bench.kernels.build import programs

    # The programs the project compiles (build.programs): a kernel's code depends on its program's company.
    return [(name, src, exprs, arch)
            for name, fam in sorted(families.items()) for src in fam.sources for exprs in programs(fam, src)
            for arch in archs]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", action="append", help="architecture (repeatable); default 90")
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args(argv)
    archs = [f"sm_{a.removeprefix('sm_')}" for a in (args.arch or ["90"])]
    todo = jobs(archs)
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        results = list(pool.map(digest_job, todo))
    lines = sorted(line for group in results for line in group)
    print("\n".join(lines))
    kernels = sum(1 for line in lines if " <module:" not in line)
    print(f"# {kernels} kernels, {len(todo)} compiles", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
