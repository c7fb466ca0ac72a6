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
