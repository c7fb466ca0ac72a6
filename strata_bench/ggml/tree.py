"""A ggml tree as the user gives it (`--ggml PATH`): the `ggml/` folder of a llama.cpp checkout, or the
checkout itself. Nothing in it is changed or copied; what the adapter needs from it is read here, once:

- its version (ggml's CMakeLists.txt) and a content hash of every file a build can read (include/, the
  headers beside the sources, ggml-cuda/), for provenance and for `--ggml-b`'s "same tree?" line;
- the three sources the variants are built from, and the kernel each must declare with the parameter list
  the launches in this package pass (a tree whose signature changed is refused, naming the kernel);
- ggml's numbers the launch depends on: each type's enum value (ggml.h), QR (ggml-common.h) and the
  mat-vec's values per thread, VDR (vecdotq.cuh). They are read, not assumed, so a tree that changed one
  launches as that tree would; each is bounded before it is parsed, so an absurd one is one line naming the
  file and the value.
"""
from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from strata_bench import literals
from strata_bench.errors import InputError

MMVQ = "src/ggml-cuda/mmvq.cu"
CONVERT = "src/ggml-cuda/convert.cu"
QUANTIZE = "src/ggml-cuda/quantize.cu"
INCLUDE_DIRS = ("include", "src", "src/ggml-cuda")
_HASHED = (".cu", ".cuh", ".h", ".hpp", ".inc", ".txt")

# ggml's type name (its enum suffix) for each format strata-bench knows; QR/VDR macros use these spellings.
TYPE_NAMES = {
    "q4_0": "Q4_0", "q4_1": "Q4_1", "q5_0": "Q5_0", "q5_1": "Q5_1", "q8_0": "Q8_0",
    "q2_k": "Q2_K", "q3_k": "Q3_K", "q4_k": "Q4_K", "q5_k": "Q5_K", "q6_k": "Q6_K",
    "iq2_xxs": "IQ2_XXS", "iq2_xs": "IQ2_XS", "iq2_s": "IQ2_S", "iq3_xxs": "IQ3_XXS", "iq3_s": "IQ3_S",
    "iq1_s": "IQ1_S", "iq1_m": "IQ1_M", "iq4_nl": "IQ4_NL", "iq4_xs": "IQ4_XS",
}
# Each format's macro of QR, which drops the type name's leading Q or IQ (QR4_0, QR4_K, QR2_XXS), and of VDR,
# which keeps it (VDR_IQ2_XXS_Q8_1_MMVQ).
QR_MACROS = {fmt: "QR" + (name[2:] if name.startswith("IQ") else name[1:]) for fmt, name in TYPE_NAMES.items()}
VDR_MACROS = {fmt: f"VDR_{name}_Q8_1_MMVQ" for fmt, name in TYPE_NAMES.items()}

# The range of each number read from a tree; a value outside it is no ggml tree's, and is refused before it
# reaches a kernel name, a launch or a record. ggml has about 40 types (the id is a template argument); QR
# is 1-8 in ggml, and at most 8 keeps QI = block values / (4*QR) at 1 or more in a 32-value block (the
# launch divides by QI); VDR, a thread's share of a block's ints, is at most QI, at most 64.
TYPE_ID_RANGE = (0, 1023)
QR_RANGE = (1, 8)
VDR_RANGE = (1, 64)
VERSION_RANGE = (0, 999_999)

# The kernels the launches in this package call, with the parameter lists they pass (spaces aside).
SIGNATURES = {
    MMVQ: ("mul_mat_vec_q", "const void * vx_ptr, const void * vy_ptr, const int32_t * ids_ptr, "
           "const ggml_cuda_mm_fusion_args_device fusion, float * dst_ptr, const uint32_t ncols_x, "
           "const uint3 nchannels_y, const uint32_t stride_row_x, const uint32_t stride_col_y, "
           "const uint32_t stride_col_dst, const uint3 channel_ratio, const uint32_t stride_channel_x, "
           "const uint32_t stride_channel_y, const uint32_t stride_channel_dst, const uint3 sample_ratio, "
           "const uint32_t stride_sample_x, const uint32_t stride_sample_y, const uint32_t stride_sample_dst, "
           "const uint32_t ids_stride"),
    QUANTIZE: ("quantize_q8_1", "const float * x_ptr, void * vy_ptr, const int64_t ne00, const int64_t s01, "
               "const int64_t s02, const int64_t s03, const int64_t ne0, const uint32_t ne1, const uint3 ne2"),
    CONVERT: ("dequantize_block_iq2_xxs", "const void * __restrict__ vx, dst_t * __restrict__ yy"),
}


@dataclass(frozen=True)
class GgmlTree:
    """A checked ggml tree: `root` is its ggml/ folder."""

    root: Path
    version: str
    content_hash: str
    type_ids: dict[str, int] = field(compare=False, repr=False)  # format -> ggml_type value
    qr: dict[str, int] = field(compare=False, repr=False)  # format -> QR
    vdr: dict[str, int] = field(compare=False, repr=False)  # format -> VDR of the mat-vec

    def path(self, relative: str) -> Path:
        return self.root / relative

    @property
    def formats(self) -> tuple[str, ...]:
        """The formats this tree has a type, QR and VDR for (the ones its mat-vec and conversions run)."""
        return tuple(f for f in TYPE_NAMES if f in self.type_ids and f in self.qr and f in self.vdr)

    def record(self) -> dict[str, str]:
        """What provenance keeps of the tree."""
        return {"path": str(self.root), "version": self.version, "sha256": self.content_hash}


def locate(path: str | Path, option: str = "--ggml") -> GgmlTree:
    """The ggml tree at `path` (its ggml/ folder or a checkout holding one); InputError, one line naming
    what is missing or changed, for anything else."""
    given = Path(path).expanduser()
    if not given.exists():
        raise InputError(f"{option} {path}: no such directory")
    root = next((r for r in (given, given / "ggml") if (r / MMVQ).is_file()), None)
    if root is None:
        raise InputError(f"{option} {path}: not a ggml tree (no {MMVQ} in it or in its ggml/ folder)")
    root = root.resolve()
    for source, (kernel, params) in SIGNATURES.items():
        _check_signature(root, source, kernel, params, option)
    return GgmlTree(root, read_version(root, option), tree_hash(root), read_type_ids(root, option),
                    _read_macros(root, "src/ggml-common.h", QR_MACROS, QR_RANGE, option),
                    _read_macros(root, "src/ggml-cuda/vecdotq.cuh", VDR_MACROS, VDR_RANGE, option))


UNKNOWN_VERSION = "unknown"


def read_version(root: Path, option: str = "--ggml") -> str:
    """MAJOR.MINOR.PATCH from ggml's CMakeLists.txt; "unknown", said in one line on stderr, for a tree without
    one (a copy of the sources alone: the file only names the version, which provenance records)."""
    if not (root / "CMakeLists.txt").exists():
        print(f"{option} {root}: no CMakeLists.txt, so its version is recorded as {UNKNOWN_VERSION}", file=sys.stderr)
        return UNKNOWN_VERSION
    text = _read(root / "CMakeLists.txt", option)
    parts = [re.search(rf"set\(GGML_VERSION_{p}\s+(\d+)\)", text) for p in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        raise InputError(f"{option} {root}: CMakeLists.txt sets no GGML_VERSION_MAJOR/MINOR/PATCH")
    for part, m in zip(("MAJOR", "MINOR", "PATCH"), parts):
        _number(m.group(1), VERSION_RANGE, f"{root}: CMakeLists.txt: GGML_VERSION_{part}", option)
    return ".".join(m.group(1) for m in parts)  # as written: provenance keeps the tree's own text


def tree_hash(root: Path) -> str:
    """sha256 over every file a build of the three sources can read (path and bytes, in sorted order)."""
    digest = hashlib.sha256()
    files = [root / "CMakeLists.txt"] if (root / "CMakeLists.txt").is_file() else []
    files += [p for p in (root / "include").rglob("*") if p.is_file() and p.suffix in _HASHED]
    files += [p for p in (root / "src").glob("*") if p.is_file() and p.suffix in _HASHED]
    files += [p for p in (root / "src/ggml-cuda").rglob("*") if p.is_file() and p.suffix in _HASHED]
    for p in sorted(set(files)):
        digest.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    return digest.hexdigest()


def read_type_ids(root: Path, option: str = "--ggml") -> dict[str, int]:
    """format -> its ggml_type value, from `GGML_TYPE_<NAME> = <n>,` in include/ggml.h."""
    text = _uncommented(_read(root / "include/ggml.h", option))
    found = {m.group(1): m.group(2) for m in re.finditer(r"GGML_TYPE_(\w+)\s*=\s*(\d+)", text)}
    return {fmt: _number(found[name], TYPE_ID_RANGE, f"{root}: include/ggml.h: GGML_TYPE_{name}", option)
            for fmt, name in TYPE_NAMES.items() if name in found}


def _read_macros(root: Path, relative: str, macros: dict[str, str], limits: tuple[int, int],
                 option: str) -> dict[str, int]:
    """format -> the number `#define <its macro> <n>` gives in the tree's `relative` file (none where the
    file is missing)."""
    path = root / relative
    text = _read(path, option) if path.exists() else ""
    found = {m.group(1): m.group(2) for m in re.finditer(r"#define\s+(\w+)\s+(\d+)\b", text)}
    return {fmt: _number(found[name], limits, f"{root}: {relative}: {name}", option)
            for fmt, name in macros.items() if name in found}


def _number(literal: str, limits: tuple[int, int], where: str, option: str) -> int:
    """The tree's number `literal`, read at `where` (the file and the value's name); InputError in one line
    where it lies outside `limits` (5000 digits were a ValueError traceback)."""
    value = literals.bounded(literal, *limits)
    if value is None:
        raise InputError(f"{option} {where} is {literals.shown(literal)}, not in {limits[0]}..{limits[1]}")
    return value


def _check_signature(root: Path, source: str, kernel: str, params: str, option: str) -> None:
    why = lacking_kernel(root, source, kernel, params, option)
    if why is not None:
        raise InputError(f"{option} {root}: {why}")


def lacking_kernel(root: Path, source: str, kernel: str, params: str, option: str = "--ggml") -> str | None:
    """None where `source` declares `__global__ void kernel(params)` (spaces aside); else why not, in words
    naming the kernel (no such kernel, or its parameters as the tree has them)."""
    text = _read(root / source, option)
    match = re.search(rf"__global__\s+void\s+{kernel}\s*\(([^)]*)\)", text)
    if match is None:
        return f"{source} has no __global__ kernel {kernel} (an unsupported ggml version?)"
    if squash(match.group(1)) != squash(params):
        return (f"{source}: {kernel}'s parameters changed (an unsupported ggml version): "
                f"({' '.join(match.group(1).split())})")
    return None


def _uncommented(text: str) -> str:
    """C source without its comments (a retired type stays in ggml.h as `// GGML_TYPE_Q4_2 = 4,`)."""
    return re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)


def first_reason(*checks: Callable[[], str | None]) -> str | None:
    """The first of `checks` to find something lacking, its reason; None where none does (a check after it
    is not run: it may read what the earlier one found missing)."""
    return next((why for check in checks if (why := check()) is not None), None)


def squash(text: str) -> str:
    """C text without its white space, to compare declarations however they are laid out."""
    return re.sub(r"\s+", "", text)


def _read(path: Path, option: str) -> str:
    if path.exists() and not path.is_file():  # a FIFO or a device would block the read for ever
        raise InputError(f"{option} {path.parent}: {path.name} is not a regular file")
    try:
        return path.read_text(errors="replace")
    except OSError as exc:
        raise InputError(f"{option} {path.parent}: cannot read {path.name} ({exc.strerror})") from None
