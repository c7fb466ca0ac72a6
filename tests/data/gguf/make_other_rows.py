"""Writes tests/data/gguf/other-rows.gguf: a small GGUF file that is not the committed SmolLM2 rows file,
for `parity --gguf` (seeded blocks of the formats the families take, under model-like tensor names, plus
a float32 norm a broad --tensor regex must leave out and a 3-D expert tensor).

    python tests/data/gguf/make_other_rows.py    # deterministic: the same bytes every time
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
# name, format, rows, cols, seed (rows of a 3-D tensor: experts x rows per expert)
TENSORS = (
    ("blk.0.ffn_gate.weight", "iq3_s", 72, 2560, 11),
    ("blk.0.ffn_up.weight", "iq2_xxs", 72, 2560, 12),
    ("blk.0.ffn_down.weight", "q8_0", 64, 1024, 13),
    ("blk.1.ffn_down.weight", "iq4_xs", 64, 1024, 14),
    ("blk.1.ffn_gate_exps.weight", "iq4_nl", 4 * 32, 512, 15),
)


def write(path: Path) -> Path:
    from gguf import GGMLQuantizationType, GGUFWriter

    from strata_bench.data.synthetic import synthetic_weights

    writer = GGUFWriter(str(path), "strata-test")
    writer.add_string("general.name", "strata-bench other rows (seeded blocks, not a model)")
    for name, fmt, rows, cols, seed in TENSORS:
        raw = synthetic_weights(fmt, rows, cols, seed)
        shape = (4, rows // 4, cols) if "exps" in name else (rows, cols)
        writer.add_tensor(name, raw.reshape(*shape[:-1], raw.shape[-1]),  # bytes: gguf-py derives the shape
                          raw_dtype=GGMLQuantizationType[fmt.upper()])
    norm = np.linspace(0.5, 1.5, 2560, dtype=np.float32)
    writer.add_tensor("blk.0.attn_norm.weight", norm)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


if __name__ == "__main__":
    print(write(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "other-rows.gguf"))
