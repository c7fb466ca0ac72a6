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


# --- A/B results made from planted values (tests of ab, report and results) ---------------------------
def _planted_arm(label, values, details=None, failure=None):
    """An arm that returns the next planted value; a string raises RunFailed with it as the reason (and
    `failure` as its details), an exception is raised as it is."""
    from strata_bench.ab.arms import Arm, RunFailed

    it = iter(values)

    def run():
        value = next(it)
        if isinstance(value, str):
            raise RunFailed(value, dict(failure or {"exit_code": 9}))
        if isinstance(value, BaseException):
            raise value
        return value

    return Arm(label, run, {"variant": label.lower()} if details is None else details)


def _records_file(root, kind, records):
    """A results summary and records file of `kind` holding `records` (no provenance)."""
    from strata_bench.results.store import ResultsWriter

    writer = ResultsWriter(root, kind, {})
    for record in records:
        writer.append(record)
    return writer.finish({"n": len(records)}, 0)


def _ab_file(root, a, b, name="case1", pairs=4, warmup=1):
    """A command A/B of planted values written under root: (summary path, records path, live outcome)."""
    from strata_bench.ab.plan import make_plan
    from strata_bench.ab.runner import run_ab
    from strata_bench.ab.store import finish
    from strata_bench.results.store import ResultsWriter

    writer = ResultsWriter(root, "ab", {"devices": []})
    plan = make_plan("abba", pairs=pairs, warmup=warmup, seed=5, max_failures="50%")
    tail = {"output_tail": "last line\n"}
    outcome = run_ab(_planted_arm("A", a, {"argv": ["prog"], "env": {}}, tail),
                     _planted_arm("B", b, {"argv": ["prog"], "env": {"X": "1"}}, tail), plan, writer, case=name)
    return finish(writer, [outcome]), writer.records_path, outcome


@pytest.fixture
def planted_arm():
    return _planted_arm


@pytest.fixture
def records_file():
    return _records_file


@pytest.fixture
def ab_file():
    return _ab_file
