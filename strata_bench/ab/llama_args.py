"""Checks of llama.cpp command lines before an A/B starts: a model that is not GGUF is bad input (exit 2),
not 2N failed runs.

A command is a llama.cpp one when a word's file name starts with `llama-` (llama-bench, llama-server,
llama-perplexity, ...); its `-m`/`--model` file must exist and begin with the GGUF magic. A path still
holding a `{param}` is checked per value by nobody: it is left alone.
"""
from __future__ import annotations

import os
import shlex
from typing import Iterable

from strata_bench.errors import InputError

GGUF_MAGIC = b"GGUF"
MODEL_FLAGS = ("-m", "--model")


def model_paths(command: str) -> list[str]:
    """The -m/--model values of every llama.cpp program in a command line (a shell line split by words)."""
    try:
        words = shlex.split(command, comments=False)
    except ValueError:
        return []
    found, in_llama = [], False
    for i, word in enumerate(words):
        if word in ("&&", "||", ";", "|"):
            in_llama = False
        elif os.path.basename(word).startswith("llama-"):
            in_llama = True
        elif in_llama and word in MODEL_FLAGS and i + 1 < len(words):
            found.append(words[i + 1])
        elif in_llama and word.startswith("--model="):
            found.append(word.split("=", 1)[1])
    return found


def check_models(commands: Iterable[str | None]) -> None:
    """InputError (one line, the path) for a llama.cpp model that is missing or not a GGUF file."""
    for command in commands:
        for path in model_paths(command or ""):
            if "{" in path or "$" in path:
                continue  # a parameter or a shell variable: known only when the run starts
            try:
                with open(path, "rb") as f:
                    magic = f.read(4)
            except OSError as exc:
                raise InputError(f"model file cannot be read ({exc.strerror}): {path}") from None
            if magic != GGUF_MAGIC:
                raise InputError(f"model is not a GGUF file (it starts {magic!r}, not b'GGUF'): {path}")
