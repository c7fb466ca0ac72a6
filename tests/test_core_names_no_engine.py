"""The core names no engine: outside strata_bench/ggml/, no module imports that package, and no code (strings
included, docstrings and comments aside) names its options or variants. An extension plugs in through
cases/spec.Extension alone, so the next engine's kernels need no change here (issue 32: seven did)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "strata_bench"
ENGINE = ROOT / "ggml"
# strata_bench/engine builds llama.cpp from its tree for whole-engine A/Bs: naming the tree's folders
# (ggml/, ggml/src/ggml-cuda) is its job, as naming ggml's options is strata_bench/ggml's.
BUILDER = ROOT / "engine"
# gguf's own type names (GGML_TYPE_*, ggml_type) are the file format's, not the engine's.
NAMED = re.compile(r"(?<![A-Za-z_])(--ggml|ggml_b|ggml)(?![A-Za-z_.])")


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def engine_mentions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("strata_bench.ggml"):
            found.append(f"{path.name}:{node.lineno}: imports {node.module}")
        elif isinstance(node, ast.Import) and any(a.name.startswith("strata_bench.ggml") for a in node.names):
            found.append(f"{path.name}:{node.lineno}: imports strata_bench.ggml")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if NAMED.search(node.value):
                found.append(f"{path.name}:{node.lineno}: {node.value[:60]!r}")
    return found


def test_no_core_module_names_the_engine():
    found = [m for p in sorted(ROOT.rglob("*.py")) if not {ENGINE, BUILDER} & set(p.parents)
             for m in engine_mentions(p)]
    assert found == []


def test_the_check_sees_an_import_and_a_name(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('"""ggml in a docstring is fine."""\nfrom strata_bench.ggml import load\nPEER = ("ggml", "x")\n')
    assert engine_mentions(module) == ["m.py:2: imports strata_bench.ggml", "m.py:3: 'ggml'"]
