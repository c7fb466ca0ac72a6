"""Provenance and `strata-bench env`: complete on any host, exit 77 with the reason without a GPU."""
from __future__ import annotations

import json
import sys
import types

import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli
from strata_bench.kernels.sources import kernels_src_hash
from strata_bench.report import env as envinfo
from strata_bench.results import provenance
from strata_bench.gpu import nvml
from strata_bench.gpu import devices as gpu

H200_PROPS = {
    "name": b"NVIDIA H200", "major": 9, "minor": 0, "multiProcessorCount": 132, "l2CacheSize": 62914560,
    "memoryClockRate": 3201000, "memoryBusWidth": 6144, "totalGlobalMem": 150_000_000_000,
    "pciDomainID": 0, "pciBusID": 0x19, "pciDeviceID": 0,
}


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(gpu, "probe", lambda: gpu.GpuProbe(False, 0, "cudaErrorNoDevice"))


@pytest.fixture
def fake_h200(monkeypatch):
    """One H200 as CUDA would describe it, NVML absent (the clocks then carry a reason)."""
    # CuPy's runtime module is what gets patched; `.[dev]` installs no CuPy, so skip with that reason.
    runtime = pytest.importorskip("cupy_backends.cuda.api.runtime", reason="CuPy is not installed")

    monkeypatch.setattr(gpu, "probe", lambda: gpu.GpuProbe(True, 1, ""))
    monkeypatch.setattr(runtime, "getDeviceProperties", lambda i: dict(H200_PROPS))
    monkeypatch.setattr(nvml, "NVML_STATE", {"error": "NVML not usable (test)"})


def test_collect_without_gpu_records_everything_else(no_gpu, monkeypatch):
    monkeypatch.setenv("STRATA_TEST_SWITCH", "on")
    prov = provenance.collect(None, extra={"case": "x"}, archs=["sm_90"])
    assert prov["devices"] == [] and prov["devices_reason"] == "cudaErrorNoDevice"
    assert prov["kernels_src_hash"] == kernels_src_hash()
    assert "-ftz=false" in prov["compile_options"]["sm_90"]
    assert prov["env"]["STRATA_TEST_SWITCH"] == "on"
    assert prov["extra"] == {"case": "x"}
    assert prov["packages"]["numpy"] and prov["packages"]["strata-bench"]
    assert set(prov["git"]) == {"commit", "dirty"}
    assert prov["created_utc"].endswith("+00:00")
    json.dumps(prov)  # a results summary must be able to hold it as is


@pytest.mark.parametrize("nvml_works", [True, False])
def test_collect_initialises_nvml_once_per_process_and_compiles_nothing(no_gpu, monkeypatch, nvml_works):
    """What keeps collect() cheap on every results file: NVML's initialisation (slow on a GPU host) is
    tried once per process, whether it works or not, and the recorded compile options compile nothing."""
    from strata_bench.kernels import nvrtc

    inits = []

    def init():
        inits.append(1)
        if not nvml_works:
            raise RuntimeError("NVML Shared Library Not Found")

    fake = types.SimpleNamespace(nvmlInit=init, nvmlSystemGetDriverVersion=lambda: b"580.95.05")
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(nvml, "NVML_STATE", {})
    monkeypatch.setattr(nvrtc, "compile_program", lambda *a, **k: pytest.fail("collect() compiled a program"))
    runs = [provenance.collect(None, archs=["sm_90"]) for _ in range(3)]
    assert inits == [1]
    if nvml_works:
        assert [r["cuda"]["nvml_driver"] for r in runs] == ["580.95.05"] * 3
    else:
        assert [r["cuda"]["reason"]["nvml_driver"] for r in runs] == [
            "NVML not usable (RuntimeError: NVML Shared Library Not Found)"] * 3
    assert all("-ftz=false" in r["compile_options"]["sm_90"] for r in runs)


def test_missing_package_is_none():
    versions = provenance.package_versions(("click", "surely-not-installed-pkg"))
    assert versions["surely-not-installed-pkg"] is None and versions["click"]


@pytest.mark.parametrize("encoded, text", [(13000, "13.0"), (13020, "13.2"), (12080, "12.8"), (0, None)])
def test_cuda_version_encoding(encoded, text):
    assert provenance._cuda_version_text(encoded) == text


def test_cuda_versions_give_reasons_not_errors(monkeypatch):
    runtime = pytest.importorskip("cupy_backends.cuda.api.runtime", reason="CuPy is not installed")

    def broken():
        raise RuntimeError("driver exploded")

    monkeypatch.setattr(runtime, "driverGetVersion", broken)
    monkeypatch.setattr(nvml, "NVML_STATE", {"error": "NVML not usable (test)"})
    cuda = provenance.cuda_versions()
    assert cuda["driver"] is None and cuda["reason"]["driver"] == "RuntimeError: driver exploded"
    assert cuda["nvml_driver"] is None and cuda["reason"]["nvml_driver"] == "NVML not usable (test)"


def test_device_properties_and_nvml_reason(fake_h200):
    prov = provenance.collect(None)
    (dev,) = prov["devices"]
    assert dev["name"] == "NVIDIA H200" and dev["arch"] == "sm_90" and dev["compute_capability"] == "9.0"
    assert (dev["sm_count"], dev["l2_bytes"], dev["memory_bus_width_bits"]) == (132, 62914560, 6144)
    assert dev["pci_bus_id"] == "00000000:19:00.0"
    assert dev["nvml"]["power_limit_w"] is None and dev["nvml"]["reason"] == {"all": "NVML not usable (test)"}
    assert list(prov["compile_options"]) == ["sm_90"]  # the devices' arch, by default


def test_nvml_values_are_converted(monkeypatch):
    class FakeNvml:
        NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

        def nvmlDeviceGetHandleByPciBusId(self, bus):
            assert bus == b"00000000:19:00.0"
            return "h"

        def nvmlDeviceGetClockInfo(self, h, kind): return {1: 1755, 2: 3201}[kind]
        def nvmlDeviceGetMaxClockInfo(self, h, kind): return {1: 1980, 2: 3201}[kind]
        def nvmlDeviceGetEnforcedPowerLimit(self, h): return 700000  # milliwatts
        def nvmlDeviceGetTemperature(self, h, kind): raise RuntimeError("not supported")

    monkeypatch.setattr(nvml, "NVML_STATE", {"module": FakeNvml()})
    info = provenance.nvml_device_info("00000000:19:00.0", 0)
    assert (info["sm_clock_mhz"], info["max_sm_clock_mhz"], info["power_limit_w"]) == (1755, 1980, 700.0)
    assert info["temperature_c"] is None and "not supported" in info["reason"]["temperature_c"]


def test_device_rows_format_units(fake_h200):
    (row,) = envinfo.device_rows(provenance.collect(None))
    assert row["L2"] == "60 MiB" and row["mem clock"] == "3201 MHz" and row["bus"] == "6144-bit"
    assert row["memory"] == "139.7 GiB" and row["power limit"] == "-"


def test_env_with_a_device_prints_it_and_exits_0(fake_h200):
    result = CliRunner().invoke(cli, ["env"])
    assert result.exit_code == 0, result.output
    assert "NVIDIA H200" in result.stdout and "NVML clocks and power: NVML not usable (test)" in result.stdout


def test_env_without_gpu_prints_versions_then_exits_77(no_gpu):
    result = CliRunner().invoke(cli, ["env"])
    assert result.exit_code == 77
    assert result.stderr == "skipped: no usable CUDA GPU (cudaErrorNoDevice)\n"
    assert "none usable (cudaErrorNoDevice)" in result.stdout
    assert "gguf" in result.stdout and "NVRTC" in result.stdout


def test_env_json_without_gpu_is_valid_json_and_exits_77(no_gpu):
    result = CliRunner().invoke(cli, ["env", "-o", "json"])
    assert result.exit_code == 77
    body = json.loads(result.stdout)
    assert body["devices"] == [] and body["kernels_src_hash"] == kernels_src_hash()


@pytest.mark.skipif("__import__('strata_bench.gpu.devices').gpu.devices.probe().usable", reason="host has a GPU")
def test_env_on_this_gpu_less_host_exits_77_with_the_real_reason():
    result = CliRunner().invoke(cli, ["env"])
    assert result.exit_code == 77
    assert result.stderr == f"skipped: no usable CUDA GPU ({gpu.probe().reason})\n"


@pytest.mark.gpu
def test_env_on_a_gpu_host_lists_every_device():
    result = CliRunner().invoke(cli, ["env", "-o", "json"])
    assert result.exit_code == 0, result.output
    devices = json.loads(result.stdout)["devices"]
    assert len(devices) == gpu.probe().count
    assert all(d["sm_count"] > 0 and d["l2_bytes"] > 0 for d in devices)


def test_recorded_command_line_names_no_folder_of_this_machine():
    from strata_bench.kernels.sources import REPO_ROOT
    from strata_bench.results import provenance

    argv = [str(REPO_ROOT / "strata_bench" / "__main__.py"), "parity", "/elsewhere/x.py"]
    assert provenance.command_line(argv) == ["strata_bench/__main__.py", "parity", "/elsewhere/x.py"]


class TwoGpuNvml:
    """NVML of a host with two H200s, told apart by PCI bus id: device 1 runs capped at 500 W and idles."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
    BY_BUS = {b"00000000:19:00.0": (1980, 700000, 41), b"00000000:3B:00.0": (345, 500000, 33)}

    def nvmlDeviceGetHandleByPciBusId(self, bus): return self.BY_BUS[bus]
    def nvmlDeviceGetClockInfo(self, h, kind): return {1: h[0], 2: 3201}[kind]
    def nvmlDeviceGetMaxClockInfo(self, h, kind): return {1: 1980, 2: 3201}[kind]
    def nvmlDeviceGetEnforcedPowerLimit(self, h): return h[1]
    def nvmlDeviceGetTemperature(self, h, kind): return h[2]


@pytest.fixture
def fake_three_devices(monkeypatch):
    """Three CUDA devices: two H200s on buses 0x19 and 0x3B (NVML knows both), and one CUDA cannot describe."""
    runtime = pytest.importorskip("cupy_backends.cuda.api.runtime", reason="CuPy is not installed")

    def props(index):
        if index == 2:
            raise RuntimeError("cudaErrorDevicesUnavailable: all CUDA-capable devices are busy or unavailable")
        return {**H200_PROPS, "pciBusID": (0x19, 0x3B)[index]}

    monkeypatch.setattr(gpu, "probe", lambda: gpu.GpuProbe(True, 3, ""))
    monkeypatch.setattr(runtime, "getDeviceProperties", props)
    monkeypatch.setattr(nvml, "NVML_STATE", {"module": TwoGpuNvml()})


def test_every_device_is_listed_with_its_own_clocks_and_power(fake_three_devices):
    devices = provenance.collect(None)["devices"]
    assert [(d["index"], d["name"], d.get("pci_bus_id")) for d in devices] == [
        (0, "NVIDIA H200", "00000000:19:00.0"), (1, "NVIDIA H200", "00000000:3B:00.0"), (2, None, None)]
    assert [(d["nvml"]["sm_clock_mhz"], d["nvml"]["power_limit_w"]) for d in devices[:2]] == [(1980, 700.0), (345, 500.0)]
    reason = "RuntimeError: cudaErrorDevicesUnavailable: all CUDA-capable devices are busy or unavailable"
    assert devices[2] == {"index": 2, "name": None, "reason": reason}
    assert provenance.collect([1])["devices"] == [devices[1]]  # a run on device 1 records device 1 only
    rows = envinfo.device_rows({"devices": devices})
    assert [(r["#"], r["name"], r.get("power limit"), r.get("SM clock (max)")) for r in rows] == [
        ("0", "NVIDIA H200", "700.0 W", "1980 (1980) MHz"), ("1", "NVIDIA H200", "500.0 W", "345 (1980) MHz"),
        ("2", f"- ({reason})", None, None)]


def test_env_lists_every_device(fake_three_devices):
    result = CliRunner().invoke(cli, ["env"])
    assert result.exit_code == 0, result.output
    assert "Devices (3)" in result.stdout
    rows = [line for line in result.stdout.splitlines() if line.startswith(("│ 0 ", "│ 1 ", "│ 2 "))]
    assert [r.split("│")[1].strip() for r in rows] == ["0", "1", "2"]
    assert "500.0 W" in rows[1] and "700.0 W" in rows[0] and "cudaErrorDevicesUnavailable" in rows[2]
    body = json.loads(CliRunner().invoke(cli, ["env", "-o", "json"]).stdout)
    assert [d["index"] for d in body["devices"]] == [0, 1, 2]
    assert [d["nvml"]["power_limit_w"] for d in body["devices"][:2]] == [700.0, 500.0]
