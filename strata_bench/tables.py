"""Generate the i-quant CUDA constant tables from the installed gguf package.

The kernels never carry hand-copied grids: `kernels_src/generated/iq_tables.cuh` is written by this
module from `gguf.quants` class attributes (`grid_hex`, `grid_map`, `grid_shape` decoded by
`init_grid()`, `IQ2_XXS.ksigns`, `IQ4_NL.kvalues`), and `is_current()` / `--check` tell whether the
committed header still matches what the installed gguf generates.

GPU layouts (all little-endian; element i of a grid entry is byte i of its word):
- `iq2xxs_grid[256]`, `iq2xs_grid[512]`, `iq2s_grid[1024]`: uint64, 8 unsigned magnitudes each
  (values 0x08, 0x19, 0x2b), exactly ggml's iq2 grids.
- `iq3xxs_grid[256]`, `iq3s_grid[512]`: uint32, 4 unsigned magnitudes each.
- `iq1s_grid[2048]`: uint64, 8 int8 values in {-1, 0, 1} (two's complement bytes).
- `iq1s_grid_nib[2048]`: uint32, the same grid as 4-bit codes g+1 in {0, 1, 2}: byte j holds
  element j in its low nibble and element j+4 in its high nibble, so `v & 0x0F0F0F0F` gives
  elements 0..3 and `(v >> 4) & 0x0F0F0F0F` elements 4..7 as bytes, ready for `__dp4a`.
- `ksigns_iq2xs[128]`: uint8, ggml's 7-bit sign index -> 8 sign bits (bit 7 = parity).
- `ksigns_mask64[128]`: uint64, the same signs as byte masks (byte i = 0xFF when element i is
  negative), so `(g ^ m) - m` per byte negates exactly the marked elements.
- `sign_mask64[256]`: uint64, a raw sign byte (IQ2_S, IQ3_S) -> the same byte masks.
- `kvalues_iq4nl[16]`: int8; `kvalues_iq4nl_u32[4]`: the same 16 bytes as uint32 words for
  `__byte_perm` lookups.

Run `python -m strata_bench.tables` to rewrite the header, `--check` to verify it (exit 1 if stale).
"""
from __future__ import annotations

import argparse
import importlib.metadata
import sys
from pathlib import Path

import numpy as np

from strata_bench.sources import kernels_dir

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


def _pack_nibbles(grid: np.ndarray) -> np.ndarray:
    """IQ1 grid as 4-bit codes g+1: byte j = code(j) | code(j+4) << 4."""
    codes = (grid + 1).astype(np.uint8)
    packed = codes[:, :4] | (codes[:, 4:] << 4)
    return np.ascontiguousarray(packed).view("<u4").reshape(-1)


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
    if not np.array_equal(_grid_values(quants.IQ1_M), iq1):
        raise ValueError("IQ1_M grid differs from IQ1_S grid; the kernels assume one shared grid")
    return {
        "iq2xxs_grid": ("uint64_t", _pack_bytes(_grid_values(quants.IQ2_XXS), np.uint64)),
        "iq2xs_grid": ("uint64_t", _pack_bytes(_grid_values(quants.IQ2_XS), np.uint64)),
        "iq2s_grid": ("uint64_t", _pack_bytes(_grid_values(quants.IQ2_S), np.uint64)),
        "iq3xxs_grid": ("uint32_t", _pack_bytes(_grid_values(quants.IQ3_XXS), np.uint32)),
        "iq3s_grid": ("uint32_t", _pack_bytes(_grid_values(quants.IQ3_S), np.uint32)),
        "iq1s_grid": ("uint64_t", _pack_bytes(iq1, np.uint64)),
        "iq1s_grid_nib": ("uint32_t", _pack_nibbles(iq1)),
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
        f"// generated by strata_bench/tables.py from gguf {gguf_version()}; do not edit.\n"
        "// Regenerate with `python -m strata_bench.tables`; tests/test_tables.py fails when stale.\n"
        "// Layouts (little-endian, element i of a grid entry = byte i of its word) are documented\n"
        "// in the docstring of strata_bench/tables.py.\n"
        "// Builtin C types only, so the header needs no include path of its own.\n#pragma once\n"
    ]
    for name, (ctype, values) in table_arrays().items():
        parts.append(_array_text(name, ctype, values))
    return "\n".join(parts)


def header_path(root: Path | None = None) -> Path:
    return (kernels_dir() if root is None else root) / HEADER_RELPATH


def is_current(root: Path | None = None) -> bool:
    """True when the committed header equals what the installed gguf generates."""
    path = header_path(root)
    return path.is_file() and path.read_text() == render_header()


def write_header(root: Path | None = None) -> Path:
    path = header_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_header())
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate kernels_src/generated/iq_tables.cuh from gguf.")
    parser.add_argument("--check", action="store_true", help="exit 1 if the header is stale")
    args = parser.parse_args(argv)
    if args.check:
        if is_current():
            print(f"{header_path()} is current (gguf {gguf_version()})")
            return 0
        print(f"{header_path()} is stale: run python -m strata_bench.tables", file=sys.stderr)
        return 1
    print(f"wrote {write_header()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
