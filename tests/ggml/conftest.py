"""The ggml trees of the adapter's tests (tests/ggml_trees.py): a small one written in tmp_path, and the
real one of the pinned llama-cpp-python sdist, cached outside the checkout and skipped, with the reason,
where it cannot be had."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.ggml_trees import Unavailable, pinned_sdist_tree, write_fake_tree


@pytest.fixture(autouse=True)
def compiler_from_the_host(monkeypatch):
    """The compiler a tree gets is the host's (nvcc where found, else NVRTC), whatever the environment that
    runs the tests chose; a test that wants one sets STRATA_GGML_COMPILER itself."""
    monkeypatch.delenv("STRATA_GGML_COMPILER", raising=False)


@pytest.fixture
def fake_tree(tmp_path) -> Path:
    """A small ggml tree: tmp_path/llama.cpp/ggml (the checkout is its parent)."""
    return write_fake_tree(tmp_path / "llama.cpp" / "ggml")


@pytest.fixture(scope="session")
def real_tree() -> Path:
    """The pinned sdist's ggml/ folder (STRATA_GGML_SDIST_CACHE, else ~/.cache/strata-bench/ggml-sdist)."""
    try:
        return pinned_sdist_tree()
    except Unavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def nvrtc_compile(real_tree, monkeypatch, tmp_path):
    """compile(family, source, exprs) -> the compiled unit: the pinned tree's `source` built by NVRTC for
    sm_90 into an empty cache, with the ggml variants attached to a run's own catalog (skipped where NVRTC
    or CUDA's headers cannot be had)."""
    from strata_bench.cases.spec import RunSpec
    from strata_bench.ggml import build
    from strata_bench.ggml.tree import locate
    from strata_bench.ggml.variants import attach
    from strata_bench.kernels import build as kbuild
    from strata_bench.runs.catalog import build_catalog
    from tests.ggml.test_nvrtc_build import _nvrtc_or_skip

    _nvrtc_or_skip()
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(build.COMPILER_ENV, "nvrtc")
    families = build_catalog(RunSpec())
    tree = locate(real_tree)
    attach(families, tree)

    def compile_(family: str, source: str, exprs):
        return kbuild.compile_unit(families[family], f"{tree.path(source)}@ggml", list(exprs), "sm_90",
                                   use_cache=False)

    return compile_
