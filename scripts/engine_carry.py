"""Carry llama.cpp engine builds to a GPU host that cannot build them cheaply (issue 36: built on the CPU host in
the background, run on the GPU host), in parts that fit a size limit per transfer.

    python scripts/engine_carry.py pack OUT a=BIN slow=BIN2 ulp=BIN3 [--records FILE] [--part-mib 38]
    python scripts/engine_carry.py unpack OUT DEST

pack writes OUT/engines.tar.xz.partNN: one folder per arm (`strata-bench engine build` bin folders), a file
of a later arm that is byte for byte the first arm's stored as a hard link to it (two builds of a one-file
change share every library but libggml-cuda), MANIFEST.json with every file's sha256 and, with --records,
the builds' records as builds.json. Each arm stays a folder of real files: the executables find their
libraries through $ORIGIN, which is the folder of the file itself, so a symbolic link to another arm's
file would load that arm's libraries.
unpack joins the parts, unpacks them into DEST and checks every file against the manifest: exit 1 naming
the first file that differs (a part missing or from another pack), exit 2 when there are no parts.
"""
from __future__ import annotations

import argparse
import filecmp
import hashlib
import json
import lzma
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

ARCHIVE = "engines.tar.xz"
MANIFEST = "MANIFEST.json"


def sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def stage_arm(name: str, src: Path, stage: Path, first: Path | None) -> dict[str, str]:
    """Copy one bin folder into stage/name, hard-linking files the first arm has byte for byte."""
    dst = stage / name
    dst.mkdir()
    sums = {}
    for f in sorted(src.iterdir()):
        if f.is_symlink():
            os.symlink(os.readlink(f), dst / f.name)
            continue
        twin = first / f.name if first is not None else None
        if twin is not None and twin.is_file() and not twin.is_symlink() and filecmp.cmp(twin, f, shallow=False):
            os.link(twin, dst / f.name)
        else:
            shutil.copy2(f, dst / f.name)
        sums[f"{name}/{f.name}"] = sha256(f)
    return sums


def split(archive: Path, part_bytes: int) -> list[Path]:
    parts = []
    with archive.open("rb") as f:
        for i, block in enumerate(iter(lambda: f.read(part_bytes), b"")):
            parts.append(archive.with_name(f"{archive.name}.part{i:02d}"))
            parts[-1].write_bytes(block)
    archive.unlink()
    return parts


def pack(out: Path, arms: list[tuple[str, Path]], records: Path | None, part_bytes: int) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob(f"{ARCHIVE}.part*"):
        old.unlink()
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp)
        sums: dict[str, str] = {}
        for name, src in arms:
            sums |= stage_arm(name, src, stage, stage / arms[0][0] if sums else None)
        (stage / MANIFEST).write_text(json.dumps(sums, indent=1, sort_keys=True) + "\n")
        if records is not None:
            shutil.copy2(records, stage / "builds.json")
        with tarfile.open(out / ARCHIVE, "w:xz", preset=6) as tar:
            for entry in sorted(stage.iterdir()):
                tar.add(entry, arcname=entry.name)
    return split(out / ARCHIVE, part_bytes)


def unpack(parts_dir: Path, dest: Path) -> int:
    parts = sorted(parts_dir.glob(f"{ARCHIVE}.part[0-9][0-9]"))
    if not parts:
        print(f"unpack: no {ARCHIVE}.partNN in {parts_dir}", file=sys.stderr)
        return 2
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    joined = dest / ARCHIVE
    with joined.open("wb") as f:
        for part in parts:
            f.write(part.read_bytes())
    try:
        with tarfile.open(joined, "r:xz") as tar:
            tar.extractall(dest, filter="tar")
    except (tarfile.TarError, lzma.LZMAError, EOFError, OSError) as exc:  # a part missing, cut or from another pack
        print(f"unpack: {len(parts)} parts in {parts_dir} are not one whole archive: {exc}", file=sys.stderr)
        return 1
    joined.unlink()
    for rel, want in json.loads((dest / MANIFEST).read_text()).items():
        if not (dest / rel).is_file() or sha256(dest / rel) != want:
            print(f"unpack: {rel} is not the packed file (sha256 {want[:12]})", file=sys.stderr)
            return 1
    print(f"unpacked {len(parts)} parts into {dest}: {', '.join(sorted(p.name for p in dest.iterdir() if p.is_dir()))}")
    return 0


def arm(text: str) -> tuple[str, Path]:
    name, _, folder = text.partition("=")
    if not name or not Path(folder).is_dir():
        raise argparse.ArgumentTypeError(f"{text!r}: give NAME=BIN_FOLDER, an existing folder")
    return name, Path(folder)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    p = verbs.add_parser("pack")
    p.add_argument("out", type=Path)
    p.add_argument("arms", type=arm, nargs="+")
    p.add_argument("--records", type=Path)
    p.add_argument("--part-mib", type=float, default=38.0)
    u = verbs.add_parser("unpack")
    u.add_argument("parts_dir", type=Path)
    u.add_argument("dest", type=Path)
    args = parser.parse_args(argv)
    if args.verb == "unpack":
        return unpack(args.parts_dir, args.dest)
    parts = pack(args.out, args.arms, args.records, int(args.part_mib * 2**20))
    print(f"packed {len(args.arms)} arms into {len(parts)} parts: {', '.join(str(p) for p in parts)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
