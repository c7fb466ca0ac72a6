"""kernels/launch.py's device queries without a GPU: a stand-in for CuPy's runtime answers
getDeviceProperties as CUDA would (sharedMemPerBlockOptin, major) for the current device."""
from __future__ import annotations

import sys
import types

import pytest

from strata_bench.kernels import launch

# getDeviceProperties' values of two devices: an H200 (sm_90) and an A100 (sm_80)
PROPS = {0: {"major": 9, "sharedMemPerBlockOptin": 232448}, 1: {"major": 8, "sharedMemPerBlockOptin": 166912}}


@pytest.fixture
def device(monkeypatch):
    """CuPy's current device and runtime, stubbed; the queries asked, in order, as (device, key) ... lists."""
    state = types.SimpleNamespace(current=0, asked=[])

    def properties(dev):
        state.asked.append(dev)
        return dict(PROPS[dev])

    runtime = types.SimpleNamespace(getDeviceProperties=properties)
    api = types.ModuleType("cupy_backends.cuda.api")
    api.runtime = runtime
    monkeypatch.setitem(sys.modules, "cupy_backends", types.ModuleType("cupy_backends"))
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda", types.ModuleType("cupy_backends.cuda"))
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.api", api)
    cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(Device=lambda: types.SimpleNamespace(id=state.current)))
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    for cached in (launch._shared_optin, launch._compute_major):
        cached.cache_clear()
    yield state
    for cached in (launch._shared_optin, launch._compute_major):
        cached.cache_clear()


def test_shared_optin_is_the_current_devices_and_asked_once(device):
    assert launch.shared_optin() == 227 * 1024 and launch.compute_major() == 9
    device.current = 1
    assert launch.shared_optin() == 163 * 1024 and launch.compute_major() == 8
    assert launch.shared_optin(0) == 227 * 1024
    assert [launch.shared_optin() for _ in range(3)] == [163 * 1024] * 3
    assert device.asked == [0, 0, 1, 1]  # once per device and query: a launch asks before every pass
