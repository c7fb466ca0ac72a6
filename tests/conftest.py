"""Shared test helpers: GPU and NVRTC skips with the real reason, and an isolated cubin cache.

Tests marked `@pytest.mark.gpu` or `@pytest.mark.nvrtc` are skipped here (with the probe's reason) when
the host lacks what they need; the `gpu` and `nvrtc` fixtures do the same for a single test.
"""
from __future__ import annotations

import functools

import pytest


def gpu_skip_reason() -> str | None:
    """None when a CUDA GPU is usable, else the probe's one-line reason."""
    from strata_bench.runner.devices import probe

    status = probe()
    return None if status.usable else f"no usable CUDA GPU ({status.reason})"


@functools.lru_cache(maxsize=1)
def nvrtc_skip_reason() -> str | None:
    """None when NVRTC can compile here (no GPU needed, no CuPy), else why not."""
    from strata_bench.kernels import nvrtc

    try:
        nvrtc.version()
    except nvrtc.NvrtcUnavailable as exc:
        return str(exc)
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A compile test of a kernel that needs a CUDA toolkit header this host lacks (crt/mma.h for wmma)
    skips with that reason instead of failing; on a host with the toolkit it runs as usual."""
    from strata_bench.kernels.build import ToolkitHeadersMissing

    try:
        return (yield)
    except ToolkitHeadersMissing as exc:
        pytest.skip(f"CUDA toolkit headers missing: {exc}")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("gpu") is not None and (reason := gpu_skip_reason()):
        pytest.skip(reason)
    if item.get_closest_marker("nvrtc") is not None and (reason := nvrtc_skip_reason()):
        pytest.skip(reason)


@pytest.fixture
def gpu():
    """The GpuProbe of this host; skips the test (with the reason) when no GPU is usable."""
    from strata_bench.runner.devices import probe

    if reason := gpu_skip_reason():
        pytest.skip(reason)
    return probe()


@pytest.fixture
def nvrtc():
    """The project's NVRTC binding (strata_bench.kernels.nvrtc); skips the test when NVRTC cannot be loaded."""
    if reason := nvrtc_skip_reason():
        pytest.skip(reason)
    from strata_bench.kernels import nvrtc as binding

    return binding


@pytest.fixture
def cubin_cache(tmp_path, monkeypatch):
    """A private, empty cubin cache for this test (STRATA_CACHE_DIR)."""
    path = tmp_path / "cubin-cache"
    monkeypatch.setenv("STRATA_CACHE_DIR", str(path))
    return path


@pytest.fixture
def family_registry():
    """The case registry, restored after the test so families a test's case file declares do not leak."""
    from strata_bench import cases

    # Built-ins first: their modules register only when first imported, so a registry restored to a
    # state without them would stay without them for the rest of the session.
    cases.load_builtin_families()
    saved = dict(cases.FAMILIES)
    yield cases.FAMILIES
    cases.FAMILIES.clear()
    cases.FAMILIES.update(saved)
