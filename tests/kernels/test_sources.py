"""kernels_src and the built-in fixtures travel in a built wheel as package data, and the kernels_src hash
is the same from the checkout and from the wheel."""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

import pytest

from strata_bench.kernels.sources import REPO_ROOT, builtin_data, kernels_src_hash


def test_checkout_uses_its_own_folders():
    assert builtin_data("kernels_src") == REPO_ROOT / "kernels_src"
    assert builtin_data("fixtures") == REPO_ROOT / "fixtures"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    # Built from a copy: setuptools leaves build/ and *.egg-info in the tree it builds.
    tree, out = tmp_path_factory.mktemp("tree"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(REPO_ROOT / name, tree / name)
    for name in ("strata_bench", "kernels_src", "fixtures"):
        shutil.copytree(REPO_ROOT / name, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", str(tree), "--no-deps", "-q", "-w", str(out)],
                         capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        pytest.skip(f"pip wheel could not build here: {run.stderr.strip().splitlines()[-1:]}")
    return next(out.glob("strata_bench-*.whl"))


@pytest.mark.slow  # about 21 s on 2 cores: pip builds the wheel in an isolated environment
def test_wheel_ships_kernels_src_with_the_same_hash_and_the_fixtures(wheel, tmp_path):
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tmp_path, [n for n in archive.namelist() if n.startswith("strata_bench/builtin_")])
    shipped = tmp_path / "strata_bench"
    assert kernels_src_hash(shipped / "builtin_kernels_src") == kernels_src_hash(REPO_ROOT / "kernels_src")
    committed = sorted(p.name for p in (REPO_ROOT / "fixtures").iterdir())
    assert sorted(p.name for p in (shipped / "builtin_fixtures").iterdir()) == committed
