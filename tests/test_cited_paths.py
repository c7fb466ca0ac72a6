"""Every file of this repository that a comment, docstring or document cites exists: a path whose first folder
is a top-level folder of the checkout or a package of strata_bench, resolved from the checkout, the package,
kernels_src/, or the citing file's own folder and its experiment's (a renamed module left its old name in
three comments once)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CITATION = re.compile(r"(?<![\w./<{-])((?:[\w.-]+/)+[\w.-]+\.(?:py|cu|cuh|md|toml|sh))\b")
TOP = {"strata_bench", "kernels_src", "docs", "scripts", "experiments", "examples", "tests"}
PACKAGES = {p.name for p in (ROOT / "strata_bench").iterdir() if (p / "__init__.py").is_file()}
KERNEL_FOLDERS = {p.name for p in (ROOT / "kernels_src").iterdir() if p.is_dir()}
CITING = [*(ROOT / "strata_bench").rglob("*.py"), *(ROOT / "kernels_src").rglob("*.cu*"),
          *(ROOT / "scripts").glob("*"), *(ROOT / "docs").glob("*.md"), ROOT / "README.md",
          *(p for p in (ROOT / "experiments").rglob("*") if p.suffix in (".py", ".cu", ".cuh", ".md")
            and "tests" not in p.parts)]


# A llama.cpp tree's own layout (ggml/src/ggml-cuda/mmvq.cu), cited by the code that reads such a tree.
ENGINE_TREE = ("ggml/src/", "ggml/include/")


def _is_ours(path: str) -> bool:
    if path.startswith(ENGINE_TREE):
        return False
    head = path.split("/", 1)[0]
    return head in TOP | PACKAGES | KERNEL_FOLDERS


def _exists(path: str, citing: Path) -> bool:
    experiment = next((citing.parents[i] for i, p in enumerate(citing.parents) if p.parent.name == "experiments"),
                      None)
    bases = [ROOT, ROOT / "strata_bench", ROOT / "kernels_src", citing.parent, *([experiment] if experiment else [])]
    return any((base / path).exists() for base in bases)


def missing_citations() -> list[str]:
    out = []
    for citing in CITING:
        if not citing.is_file():
            continue
        for match in CITATION.finditer(citing.read_text(errors="replace")):
            path = match.group(1)
            if _is_ours(path) and not _exists(path, citing):
                out.append(f"{citing.relative_to(ROOT)}: {path}")
    return sorted(set(out))


def test_every_cited_file_exists():
    assert missing_citations() == []


def test_the_check_finds_a_missing_file(tmp_path):
    citing = ROOT / "strata_bench" / "cases" / "spec.py"
    assert _is_ours("kernels/param_check.py") and not _exists("kernels/param_check.py", citing)
    assert _exists("toml_abi/abi_check.py", citing) and _exists("strata_bench/cases/spec.py", citing)
