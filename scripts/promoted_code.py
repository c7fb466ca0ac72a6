"""Is a promoted kernel the code that was timed? Compare, byte for byte, the code sections of kernels compiled
from an earlier tree (the experiment's source at the commit a GPU run timed) with kernels of this tree.

    PYTHONPATH=$PWD python scripts/promoted_code.py --base REV [--arch 90] \\
        'experiments/mmvq_mma5/kernels/mmvq_mma5.cu:mmvq_mma<siq::fmt_iq3_s, 4, 1, 1>=mmvq/mmvq_mma.cu' ...

A pair is `BASE_SOURCE:EXPRESSION=SOURCE[:EXPRESSION]` (the expression defaults to the base's): a source under
experiments/ compiles from its own folder, any other from kernels_src. Each side is compiled alone through the
project's build path (compile_source, cache off) by the NVRTC this interpreter loads (put a private
nvidia-cuda-nvrtc target first on PYTHONPATH for another version); the base tree is `git archive REV` in a
temporary folder, run there. Compared: `.text`, `.nv.constant0` and `.nv.shared` of the kernel (bytes, and the
size of the NOBITS shared section), not the sections' symbol and link indexes, which move with the company a
kernel keeps in its module (cubin_digests.py hashes those too). Exit 1 if any pair differs.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SECTIONS = (".text", ".nv.constant0", ".nv.shared")


def _where(source: str) -> tuple[str, Path | None]:
    """(source, root) for compile_source: an experiment's kernel from its folder, else kernels_src's."""
    path = Path(source)
    return (path.name, Path.cwd() / path.parent) if path.parts[0] == "experiments" else (source, None)


def dump(specs: list[str], arch: str) -> dict:
    """{spec: {section: [size, sha256 of its bytes]}} of this working directory's tree, and the NVRTC version."""
    sys.path[:0] = [str(Path.cwd()), str(Path.cwd() / "scripts")]
    from cubin_digests import elf_sections

    from strata_bench.kernels import nvrtc
    from strata_bench.kernels.build import compile_source

    out = {"nvrtc": "%d.%d" % nvrtc.version()}
    for spec in specs:
        source, expr = spec.split(":", 1)
        name, root = _where(source)
        built = compile_source(name, [expr], arch, use_cache=False, **({"root": root} if root else {}))
        found = {n: data for n, _kind, _flags, data in elf_sections(built.cubin)}
        mangled = built.lowered[expr]
        # elf_sections' data: size, link and info (16 bytes), then the section's bytes
        out[spec] = {s: [int.from_bytes(found[f"{s}.{mangled}"][:8], "little"),
                         hashlib.sha256(found[f"{s}.{mangled}"][16:]).hexdigest()]
                     for s in SECTIONS if f"{s}.{mangled}" in found}
    return out


def _run_dump(tree: Path, specs: list[str], arch: str) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--dump", "--arch", arch, *specs]
    env_path = [p for p in sys.path if "nvrtc" in p]  # a private NVRTC target stays first
    env = {**os.environ, "PYTHONPATH": ":".join([*env_path, str(tree)])}
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="the earlier tree's revision")
    parser.add_argument("--arch", default="90")
    parser.add_argument("--dump", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("pairs", nargs="+")
    args = parser.parse_args(argv)
    arch = f"sm_{args.arch.removeprefix('sm_')}"
    if args.dump:
        print(json.dumps(dump(args.pairs, arch)))
        return 0
    pairs = []
    for pair in args.pairs:
        base, mine = pair.split("=", 1)
        pairs.append((base, mine if ":" in mine else f"{mine}:{base.split(':', 1)[1]}"))
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "archive", args.base], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        before = _run_dump(Path(tmp), [b for b, _ in pairs], arch)
    after = _run_dump(Path.cwd(), [m for _, m in pairs], arch)
    print(f"NVRTC {before['nvrtc']} (base {args.base}) / {after['nvrtc']} (this tree), {arch}")
    differ = 0
    for base, mine in pairs:
        same = before[base] == after[mine]
        differ += not same
        text = after[mine][".text"]
        print(f"{'SAME' if same else 'DIFFERS'}  {mine}  (.text {text[0]} bytes, sha256 {text[1][:12]})  <-  {base}")
        if not same:
            print(f"    base {before[base]}\n    this {after[mine]}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
