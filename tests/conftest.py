"""Shared test helpers: GPU and NVRTC skips with the real reason, and an isolated cubin cache.

Tests marked `@pytest.mark.gpu` or `@pytest.mark.nvrtc` are skipped here (with the probe's reason) when
the host lacks what they need; the `gpu` and `nvrtc` fixtures do the same for a single test.
"""
from __future__ import annotations

import functools

import pytest


def gpu_skip_reason() -> str | None:
    """None when a CUDA GPU is usable, else the probe's one-line reason."""
    from strata_bench.gpu.devices import probe

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


SLOW_MARKED = pytest.StashKey[int]()  # how many collected tests are marked slow (tests/test_slow_marks.py)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Count the tests marked slow before `-m` deselects them, so the README's count can be held to it."""
    config.stash[SLOW_MARKED] = sum(item.get_closest_marker("slow") is not None for item in items)


@pytest.fixture
def gpu():
    """The GpuProbe of this host; skips the test (with the reason) when no GPU is usable."""
    from strata_bench.gpu.devices import probe

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
    from strata_bench.families import load_builtin_families

    # Built-ins first: their modules register only when first imported, so a registry restored to a
    # state without them would stay without them for the rest of the session.
    load_builtin_families()
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


# ---------------------------------------------------------------------------------------------------
# A numpy stand-in for cupy whose CUDA graphs run: a capture records the launches' work, a replay runs
# it and takes `us_per_launch` each. With `LazyFamily`, a variant that does its work only on its first
# launches (timed outputs checked: tests/timing/test_verify.py, tests/ab/test_kernel.py).

class _GraphStream:
    def __init__(self, non_blocking=False):
        self.captured = None

    def __enter__(self): return self
    def __exit__(self, *exc): return False
    def begin_capture(self): self.captured = []
    def end_capture(self): return self.captured


def _lazy_family_class():
    import numpy as np

    from strata_bench.cases import Family

    class LazyFamily(Family):
        """y = 2 * x. Variants "lazy" and "lazy2" do their work only on their first `honest` launches
        (together), then return at once (on a GPU a device counter does this; here a Python one);
        `bytes_per_call` is what the roofline expects one launch to move."""

        # name left empty so it does not register in the global registry
        def __init__(self, honest=2, bytes_per_call=1000):
            self.honest, self.bytes_per_call, self.calls = honest, bytes_per_call, 0

        def default_cases(self): return []
        def make_inputs(self, case): return {"x": np.arange(4, dtype=np.float32)}
        def to_device(self, case, host): return {"x": np.array(host["x"]), "w": np.zeros(250, np.float32)}
        def alloc_outputs(self, case, dev): return {"y": np.zeros(4, np.float32)}
        def reference(self, case, host): return []
        def bytes_moved(self, case): return self.bytes_per_call

        def launch(self, case, variant, kernels, dev, outs, stream=None):
            def work():
                if variant.startswith("lazy"):
                    self.calls += 1
                    if self.calls > self.honest:
                        return
                outs["y"][:] = 2 * dev["x"]

            if stream is None:
                work()
            else:
                stream.captured.append(work)

    return LazyFamily


@pytest.fixture
def graph_standin(monkeypatch):
    """cupy replaced by numpy with graphs that run; returns a namespace: LazyFamily, and `us_per_launch`
    (settable) for the replays' time."""
    import sys
    from types import SimpleNamespace

    import numpy as np

    from strata_bench.timing import bench, graph

    state = SimpleNamespace(LazyFamily=_lazy_family_class(), us_per_launch=1.0)

    def replay(graph_, stream):
        for launch in graph_:
            launch()
        return len(graph_) * state.us_per_launch * 1e-6

    runtime = SimpleNamespace(getDeviceProperties=lambda device: {"l2CacheSize": 1000}, deviceSynchronize=lambda: None)
    cuda = SimpleNamespace(Stream=_GraphStream, runtime=runtime)
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(uint8=np.uint8, array_equal=np.array_equal, cuda=cuda))
    monkeypatch.setattr(graph, "replay_seconds", replay)
    monkeypatch.setattr(bench, "replay_seconds", replay)
    return state


@pytest.fixture
def families():
    """A run's own catalog of the built-ins (runs/catalog.py): what a test adds to it stays in it."""
    from strata_bench.cases.spec import RunSpec
    from strata_bench.runs.catalog import build_catalog

    return build_catalog(RunSpec())
