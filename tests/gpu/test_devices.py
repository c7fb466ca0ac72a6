"""Device selection without a GPU: `--device N|all` against a probed device count, and the NoGpu reason."""
from __future__ import annotations

import pytest

from strata_bench.errors import InputError, NoGpu
from strata_bench.gpu import devices
from strata_bench.gpu.devices import GpuProbe, _runtime_error_name, require_gpu, select_devices


@pytest.fixture
def two_gpus(monkeypatch):
    monkeypatch.setattr(devices, "probe", lambda: GpuProbe(True, 2, ""))


def test_select_devices_parses_an_index_or_all(two_gpus):
    assert select_devices("all") == [0, 1]
    assert select_devices("1") == [1]
    with pytest.raises(InputError, match=r"--device 2 out of range: 2 device\(s\) present"):
        select_devices("2")
    with pytest.raises(InputError, match="--device must be an index or 'all', got 'gpu0'"):
        select_devices("gpu0")


def test_no_usable_gpu_is_a_nogpu_error_with_the_reason(monkeypatch):
    monkeypatch.setattr(devices, "probe", lambda: GpuProbe(False, 0, "cudaErrorNoDevice"))
    with pytest.raises(NoGpu, match=r"^skipped: no usable CUDA GPU \(cudaErrorNoDevice\)$"):
        require_gpu()
    with pytest.raises(NoGpu):
        select_devices("all")


def test_runtime_error_reason_is_the_enum_name():
    assert _runtime_error_name(RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is too old")) == \
        "cudaErrorInsufficientDriver"
    assert _runtime_error_name(ValueError("")) == "ValueError"
