"""Generate the i-quant CUDA constant tables from the installed gguf package.

The kernels never carry hand-copied grids: `kernels_src/generated/iq_tables.cuh` is written by this
module from `gguf.quants` class attributes (`grid_hex`, `grid_map`, `grid_shape` decoded by
`init_grid()`, `IQ2_XXS.ksigns`, `IQ4_NL.kvalues`), and `is_current()` / `--check` tell whether the
committed header still matches what the installed gguf generates.

GPU layouts (all little-endian; element i of a grid entry = byte i of its word, or nibble i):
- `iq2xxs_grid[256]`, `iq2xs_grid[512]`, `iq2s_grid[1024]`: uint64, 8 unsigned magnitudes each
  (values 0x08, 0x19, 0x2b), exactly ggml's iq2 grids.
- `iq2xxs_grid_nib[256]`, `iq2xs_grid_nib[512]`, `iq2s_grid_nib[1024]`: the same grids as uint32
  with element i's code (its index into gguf's `grid_map`, 0..2) in bits 4i..4i+3, so the low 16
  bits are `__byte_perm` selectors for elements 0..3 and the high 16 bits for 4..7 against
  `STRATA_IQ2_GRID_MAP` (the grid_map bytes) and, with 4 added to a selector nibble, against
  `STRATA_IQ2_GRID_MAP_NEG` (the negated bytes): sign and magnitude in one prmt. Half the bytes of the
  uint64 form, and one 32-bit shared-memory access per 8 values instead of a 64-bit one.
- `iq3xxs_grid[256]`, `iq3s_grid[512]`: uint32, 4 unsigned magnitudes each.
- `iq1s_grid[2048]`: uint64, 8 int8 values in {-1, 0, 1} (two's complement bytes).
- `iq1s_grid_nib[2048]`: uint32, the same grid as codes g+1 in {0, 1, 2}, element i in bits 4i..4i+3
  (`__byte_perm` selectors against `STRATA_IQ1_W_POS` / `STRATA_IQ1_W_NEG`, whose bytes are
  8*g+1 and 8*g-1 for g = -1, 0, 1: the IQ1 values times 8 with the +-1/8 delta folded in;
  or-ing 0x44444444 into a selector picks the negative-delta word).
- `ksigns_iq2xs[128]`: uint8, ggml's 7-bit sign index -> 8 sign bits (bit 7 = parity).
- `ksigns_mask64[128]`: uint64, the same signs as byte masks (byte i = 0xFF when element i is
  negative), so `(g ^ m) - m` per byte negates exactly the marked elements.
- `sign_mask64[256]`: uint64, a raw sign byte (IQ2_S, IQ3_S) -> the same byte masks.
- `kvalues_iq4nl[16]`: int8; `kvalues_iq4nl_u32[4]`: the same 16 bytes as uint32 words for
  `__byte_perm` lookups.

Run `python -m strata_bench.kernels.tables` to rewrite the header, `--check` to verify it (exit 1 if stale).
"""
from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import numpy as np

from strata_bench.kernels.generated import GeneratedHeader

HEADER_RELPATH = "generated/iq_tables.cuh"
VALUES_PER_LINE = {8: 4, 4: 8, 1: 16}  # hex literals per line by element size in bytes
# Spelled with builtin types: NVRTC has no <stdint.h> unless the toolkit headers are on its path.
CUDA_TYPES = {"uint64_t": "unsigned long long", "uint32_t": "unsigned int",
              "uint8_t": "unsigned char", "int8_t": "signed char"}


def gguf_version() -> str:
    return importlib.metadata.version("gguf")


def _grid_values(cls) -> np.ndarray:
    """The decoded grid of a gguf quant class as (entries, values) int64 (gguf's own decoder)."""
    cls.init_grid()
    grid = np.asarray(cls.grid).reshape(cls.grid_shape)
    values = np.rint(grid).astype(np.int64)
    if not np.array_equal(values, grid):
        raise ValueError(f"{cls.__name__} grid has non-integer values")
    return values


def _pack_bytes(values: np.ndarray, dtype) -> np.ndarray:
    """Pack rows of byte values (two's complement for negatives) into one little-endian word each."""
    as_bytes = (values & 0xFF).astype("<u1")
    return np.ascontiguousarray(as_bytes).view(np.dtype(dtype).newbyteorder("<")).reshape(-1)


def _grid_codes(cls) -> np.ndarray:
    """Each grid value's index into gguf's grid_map, (entries, values)."""
    grid = _grid_values(cls)
    grid_map = np.array(cls.grid_map, dtype=np.int64)
    codes = np.searchsorted(grid_map, grid)
    if not np.array_equal(grid_map[codes], grid):
        raise ValueError(f"{cls.__name__} grid values are not in its grid_map")
    return codes


def _pack_nibbles(codes: np.ndarray) -> np.ndarray:
    """Rows of 8 codes (< 8, so no __byte_perm sign-replicate bit) -> uint32, code i in bits 4i."""
    if codes.max() >= 8:
        raise ValueError("codes must be < 8 to be __byte_perm selectors")
    shifts = 4 * np.arange(codes.shape[1], dtype=np.uint64)
    return (codes.astype(np.uint64) << shifts).sum(axis=1).astype(np.uint32)


def _bytes_word(values) -> int:
    """Up to 4 small signed integers as one little-endian uint32 (two's complement bytes)."""
    return sum((int(v) & 0xFF) << (8 * i) for i, v in enumerate(values))


def constants() -> dict[str, int]:
    """Scalar #defines derived from gguf: byte tables for __byte_perm lookups."""
    from gguf import quants

    delta8 = float(quants.IQ1_S.delta) * 8  # the +-1/8 delta in units of 1/8
    if delta8 != 1.0 or tuple(quants.IQ1_S.grid_map) != (-1, 0, 1):
        raise ValueError("IQ1 delta/grid_map changed; the kernels' 8*g +- 1 contract needs review")
    iq1 = [8 * g for g in quants.IQ1_S.grid_map]
    return {
        "STRATA_IQ2_GRID_MAP": _bytes_word(quants.IQ2_XXS.grid_map),
        "STRATA_IQ2_GRID_MAP_NEG": _bytes_word([-v for v in quants.IQ2_XXS.grid_map]),
        "STRATA_IQ1_W_POS": _bytes_word([v + 1 for v in iq1]),
        "STRATA_IQ1_W_NEG": _bytes_word([v - 1 for v in iq1]),
    }


def _byte_masks(sign_bytes: np.ndarray) -> np.ndarray:
    """Each sign byte -> uint64 whose byte i is 0xFF when bit i is set."""
    bits = (sign_bytes.reshape(-1, 1) >> np.arange(8)) & 1
    return _pack_bytes(bits * 0xFF, np.uint64)


def table_arrays() -> dict[str, tuple[str, np.ndarray]]:
    """Every table the kernels use: name -> (CUDA element type, values), in header order."""
    from gguf import quants

    ksigns = np.frombuffer(quants.IQ2_XXS.ksigns, dtype=np.uint8)
    kvalues = np.array(quants.IQ4_NL.kvalues, dtype=np.int64)
    iq1 = _grid_values(quants.IQ1_S)
    for cls in (quants.IQ2_XS, quants.IQ2_S):
        if tuple(cls.grid_map) != tuple(quants.IQ2_XXS.grid_map):
            raise ValueError(f"{cls.__name__} grid_map differs from IQ2_XXS; one STRATA_IQ2_GRID_MAP assumed")
    if not np.array_equal(_grid_values(quants.IQ1_M), iq1):
        raise ValueError("IQ1_M grid differs from IQ1_S grid; the kernels assume one shared grid")
    return {
        "iq2xxs_grid": ("uint64_t", _pack_bytes(_grid_values(quants.IQ2_XXS), np.uint64)),
        "iq2xs_grid": ("uint64_t", _pack_bytes(_grid_values(quants.IQ2_XS), np.uint64)),
        "iq2s_grid": ("uint64_t", _pack_bytes(_grid_values(quants.IQ2_S), np.uint64)),
        "iq2xxs_grid_nib": ("uint32_t", _pack_nibbles(_grid_codes(quants.IQ2_XXS))),
        "iq2xs_grid_nib": ("uint32_t", _pack_nibbles(_grid_codes(quants.IQ2_XS))),
        "iq2s_grid_nib": ("uint32_t", _pack_nibbles(_grid_codes(quants.IQ2_S))),
        "iq3xxs_grid": ("uint32_t", _pack_bytes(_grid_values(quants.IQ3_XXS), np.uint32)),
        "iq3s_grid": ("uint32_t", _pack_bytes(_grid_values(quants.IQ3_S), np.uint32)),
        "iq1s_grid": ("uint64_t", _pack_bytes(iq1, np.uint64)),
        "iq1s_grid_nib": ("uint32_t", _pack_nibbles(_grid_codes(quants.IQ1_S))),
        "ksigns_iq2xs": ("uint8_t", ksigns.astype(np.int64)),
        "ksigns_mask64": ("uint64_t", _byte_masks(ksigns)),
        "sign_mask64": ("uint64_t", _byte_masks(np.arange(256, dtype=np.uint8))),
        "kvalues_iq4nl": ("int8_t", kvalues),
        "kvalues_iq4nl_u32": ("uint32_t", _pack_bytes(kvalues.reshape(4, 4), np.uint32)),
    }


def _literal(ctype: str, value: int) -> str:
    if ctype == "uint64_t":
        return f"0x{int(value):016x}ull"
    if ctype == "uint32_t":
        return f"0x{int(value):08x}u"
    if ctype == "uint8_t":
        return f"0x{int(value):02x}"
    return str(int(value))  # int8_t


def _array_text(name: str, ctype: str, values: np.ndarray) -> str:
    size = {"uint64_t": 8, "uint32_t": 4}.get(ctype, 1)
    per_line = VALUES_PER_LINE[size]
    items = [_literal(ctype, v) for v in values]
    lines = [
        "    " + ", ".join(items[i:i + per_line]) + ","
        for i in range(0, len(items), per_line)
    ]
    return (f"#define STRATA_{name.upper()}_SIZE {len(values)}\n"
            f"__device__ const {CUDA_TYPES[ctype]} {name}[{len(values)}] = {{\n" + "\n".join(lines) + "\n};\n")


def render_header() -> str:
    """The full text of iq_tables.cuh for the installed gguf."""
    parts = [
        f"// generated by strata_bench/kernels/tables.py from gguf {gguf_version()}; do not edit.\n"
        "// Regenerate with `python -m strata_bench.kernels.tables`; tests/kernels/test_tables.py fails when stale.\n"
        "// Layouts (little-endian, element i of a grid entry = byte i of its word) are documented\n"
        "// in the docstring of strata_bench/kernels/tables.py.\n"
        "// Builtin C types only, so the header needs no include path of its own.\n#pragma once\n"
    ]
    parts.append("".join(f"#define {name} 0x{value:08x}u\n" for name, value in constants().items()))
    for name, (ctype, values) in table_arrays().items():
        parts.append(_array_text(name, ctype, values))
    return "\n".join(parts)


HEADER = GeneratedHeader(HEADER_RELPATH, render_header, "strata_bench.kernels.tables")


def header_path(root: Path | None = None) -> Path:
    return HEADER.path(root)


def is_current(root: Path | None = None) -> bool:
    """True when the committed header equals what this module generates."""
    return HEADER.is_current(root)


def write_header(root: Path | None = None) -> Path:
    return HEADER.write(root)


def main(argv: list[str] | None = None) -> int:
    return HEADER.main(argv, "Generate kernels_src/generated/iq_tables.cuh from gguf.", f" (gguf {gguf_version()})")


if __name__ == "__main__":
    sys.exit(main())
