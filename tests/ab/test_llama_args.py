"""A llama.cpp command's model must be a readable GGUF file before an A/B starts (exit 2 otherwise)."""
from __future__ import annotations

import pytest

from strata_bench.ab.llama_args import check_models, model_paths
from strata_bench.errors import InputError


def test_model_paths_of_llama_programs_only():
    assert model_paths("bin/llama-bench -m a.gguf -p 512 && other -m b.gguf") == ["a.gguf"]
    assert model_paths("sh -c x; /x/llama-server --model=s.gguf --port 1") == ["s.gguf"]
    assert model_paths("python tool.py -m x.gguf") == [] and model_paths("unclosed 'quote") == []


def test_missing_and_not_gguf_models_are_one_line_and_params_are_left_alone(tmp_path):
    good, bad = tmp_path / "m.gguf", tmp_path / "m.bin"
    good.write_bytes(b"GGUF\x03\x00\x00\x00")
    bad.write_bytes(b"PK\x03\x04zip")
    check_models([f"llama-bench -m {good}", None, "llama-bench -m {model}", "llama-cli -m $MODEL"])
    with pytest.raises(InputError) as exc:
        check_models([f"llama-bench -m {bad} -p 512"])
    assert str(exc.value) == f"model is not a GGUF file (it starts b'PK\\x03\\x04', not b'GGUF'): {bad}"
    with pytest.raises(InputError) as exc:
        check_models([f"llama-perplexity -m {tmp_path / 'absent.gguf'}"])
    assert str(exc.value) == f"model file cannot be read (No such file or directory): {tmp_path / 'absent.gguf'}"
