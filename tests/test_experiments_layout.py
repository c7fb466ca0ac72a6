"""The product apart from the experiments (issue 26): nothing under strata_bench/ imports from experiments/ or
scripts/, kernels_src/ includes nothing of theirs, and each experiments/<name>/ is whole: a cases.py written
only against the public kit, a README.md, its tests, and its kernels (if it has any) in its own kernels/
folder, which its families compile from; or, once promoted into the product, its README.md alone (with what
proves the promotion), whose first paragraph names the product files that now hold it."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = sorted(p for p in (ROOT / "experiments").iterdir() if p.is_dir() and p.name != "__pycache__")
# "**Promoted** into `path`, `path` ...": the README of an experiment whose candidates the product now runs
PROMOTED = re.compile(r"^\*\*Promoted\*\* into (.+)$", re.M)


def promoted_into(exp: Path) -> list[str]:
    """The product paths a promoted experiment's README names ([] for an experiment still open)."""
    said = PROMOTED.search((exp / "README.md").read_text(encoding="utf-8"))
    return re.findall(r"`([^`]+)`", said.group(1)) if said else []


OPEN = [p for p in EXPERIMENTS if not promoted_into(p)]
KERNEL_SUFFIXES = {".cu", ".cuh", ".h"}


def _imports(path: Path) -> list[str]:
    """Every module a Python file imports, at module level or inside a function, and every
    importlib.import_module("...") name it spells out."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names.append(node.args[0].value)
    return names


def test_there_are_experiments():
    assert {p.name for p in EXPERIMENTS} >= {"mmvq_tune", "mmvq_mma", "fp16deq_tune"}


def test_no_module_of_the_package_imports_from_experiments_or_scripts():
    offenders = [f"{path.relative_to(ROOT)}: {name}" for path in sorted((ROOT / "strata_bench").rglob("*.py"))
                 for name in _imports(path) if name.split(".")[0] in ("experiments", "scripts")]
    assert offenders == []


def test_the_import_check_sees_function_level_and_importlib_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import importlib\ndef g():\n    from scripts.x import y\n    importlib.import_module('experiments.z')\n")
    assert {"scripts.x", "experiments.z"} <= set(_imports(f))


def test_no_built_in_kernel_includes_an_experiments_file():
    include = re.compile(r'^\s*#\s*include\s*["<]([^">]+)[">]', re.M)
    offenders = [f"{path.relative_to(ROOT)}: {name}" for path in sorted((ROOT / "kernels_src").rglob("*"))
                 if path.suffix in KERNEL_SUFFIXES
                 for name in include.findall(path.read_text(encoding="utf-8", errors="replace"))
                 if "experiments" in name or not ((ROOT / "kernels_src" / name).is_file() or (path.parent / name).is_file()
                                                  or name.startswith(("cuda", "mma.h", "stdint", "cstdint")))]
    assert offenders == []


@pytest.mark.parametrize("exp", OPEN, ids=lambda p: p.name)
def test_an_experiment_has_cases_notes_and_tests(exp):
    assert (exp / "cases.py").is_file() and (exp / "README.md").is_file()
    assert sorted((exp / "tests").glob("test_*.py")), f"{exp.name}: no tests/test_*.py"


@pytest.mark.parametrize("exp", [p for p in EXPERIMENTS if p not in OPEN], ids=lambda p: p.name)
def test_a_promoted_experiment_keeps_notes_alone_and_names_product_files_that_exist(exp):
    named = promoted_into(exp)
    assert all(name.startswith(("kernels_src/", "strata_bench/")) and (ROOT / name).is_file() for name in named), named
    assert not (exp / "cases.py").exists() and not (exp / "kernels").exists() and not (exp / "tests").exists()


def test_the_promotion_line_is_read_exactly(tmp_path):
    (tmp_path / "README.md").write_text("# x\n\n**Promoted** into `kernels_src/a.cu` and `strata_bench/b.py` (2026).\n")
    assert promoted_into(tmp_path) == ["kernels_src/a.cu", "strata_bench/b.py"]
    (tmp_path / "README.md").write_text("# x\n\nPromoted into `kernels_src/a.cu`.\n")
    assert promoted_into(tmp_path) == []


@pytest.mark.parametrize("exp", OPEN, ids=lambda p: p.name)
def test_an_experiments_cases_use_only_the_public_kit(exp):
    ours = [n for n in _imports(exp / "cases.py") if n.split(".")[0] in ("strata_bench", "experiments", "scripts", "tests")]
    assert ours and set(ours) == {"strata_bench.kit"}, ours


@pytest.mark.parametrize("exp", OPEN, ids=lambda p: p.name)
def test_an_experiments_kernels_live_in_its_kernels_folder_and_its_families_compile_from_there(exp, family_registry):
    from strata_bench.cases import load_user_cases

    kernel_files = [p for p in exp.rglob("*") if p.suffix in KERNEL_SUFFIXES]
    assert all(p.parent == exp / "kernels" for p in kernel_files), kernel_files
    names = load_user_cases(str(exp / "cases.py"))
    assert names
    for name in names:
        family = family_registry[name]
        own = [s for s in family.sources if not (ROOT / "kernels_src" / s).is_file()]
        if kernel_files:
            assert family.kernels_root == (exp / "kernels").resolve(), name
            assert own and all((exp / "kernels" / s).is_file() for s in own), (name, own)
        else:
            assert not (exp / "kernels").exists() and own == [], (name, own)


def test_scripts_holds_tools_each_listed_in_its_readme():
    readme = (ROOT / "scripts" / "README.md").read_text()
    tools = sorted(p.name for p in (ROOT / "scripts").iterdir() if p.is_file() and p.name != "README.md")
    assert tools and [t for t in tools if f"| `{t}` |" not in readme] == []
    # no --cases family left there: a family is a class that subclasses one (an experiment's)
    assert [t for t in tools if t.endswith(".py") and "builtin_family(" in (ROOT / "scripts" / t).read_text()] == []
