"""kit: the one façade a user's family imports from."""
from __future__ import annotations

import ast
from pathlib import Path

import strata_bench.kit as kit

ROOT = Path(__file__).resolve().parents[1]


def test_every_exported_name_exists_and_callables_have_docstrings():
    assert len(kit.__all__) == len(set(kit.__all__))
    for name in kit.__all__:
        obj = getattr(kit, name)
        if callable(obj):
            assert obj.__doc__, name


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    mods = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    names = {f"{node.module}.{a.name}" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
             for a in node.names}
    return mods | names


def test_built_in_families_and_examples_import_no_private_module_or_name():
    files = sorted((ROOT / "strata_bench" / "families").glob("*.py")) + sorted((ROOT / "examples").rglob("*.py"))
    for path in files:
        for imported in _imports(path):
            if imported.startswith("strata_bench"):
                assert not any(part.startswith("_") and part != "__future__" for part in imported.split(".")), \
                    f"{path.name} imports {imported}"
