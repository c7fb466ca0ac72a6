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


# --- what an extending family may use of a built-in one (kit.FAMILY_SURFACE) ----------------------------------
def test_every_surface_name_exists_is_documented_and_listed_in_extending():
    from strata_bench.families import load_builtin_families

    load_builtin_families()  # as a --cases file finds them (not left to the tests that ran before)
    extending = (ROOT / "docs" / "EXTENDING.md").read_text()
    for family, names in kit.FAMILY_SURFACE.items():
        cls = kit.builtin_family(family)
        for name in names:
            assert hasattr(cls, name), f"{family}.{name}"
            obj = getattr(cls, name)
            if callable(obj):
                assert obj.__doc__, f"{family}.{name}"
            assert f"`{name}" in extending and f"`{name}" in kit.__doc__, f"{family}.{name}"


def _builtin_attributes(path: Path) -> list[tuple[str, str]]:
    """(family, attribute) for every attribute read off a name bound to kit.builtin_family("family")."""
    tree = ast.parse(path.read_text())
    bound = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and getattr(node.value.func, "id", "") == "builtin_family"):
            bound.update({t.id: node.value.args[0].value for t in node.targets if isinstance(t, ast.Name)})
    return [(bound[node.value.id], node.attr) for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound]


def test_experiments_and_examples_use_only_the_surface_of_a_built_in_family():
    """Of a built-in family's class, a case file reads the Family contract's public names and what
    FAMILY_SURFACE lists; no case file reads a private name of anything (`obj._x`)."""
    from strata_bench.cases import Family

    contract = {n for n in dir(Family) if not n.startswith("_")}
    files = sorted((ROOT / "experiments").glob("*/cases.py")) + sorted((ROOT / "examples").glob("*/cases.py"))
    assert len(files) >= 5
    for path in files:
        for family, attr in _builtin_attributes(path):
            assert attr in contract or attr in kit.FAMILY_SURFACE.get(family, ()), f"{path}: {family}.{attr}"
        private = [n.attr for n in ast.walk(ast.parse(path.read_text()))
                   if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__")]
        assert private == [], f"{path}: {private}"
