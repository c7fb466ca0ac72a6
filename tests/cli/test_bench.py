"""`strata-bench bench --device all` on three fake devices (no CUDA): each device timed on its own with its
own ceilings, records and rows per device, each device's provenance line, and a kernel fault on device 1
that leaves devices 0 and 2 whole (exit 1, naming the device)."""
from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from strata_bench.cases import Case
from strata_bench.cli.main import cli
from strata_bench.gpu import devices as gpu
from strata_bench.timing.bench import Timing
from strata_bench.timing.ceilings import Ceilings
from strata_bench.timing.status import BenchStatus, TimingStatus

from tests.cli.fake_devices import fake_three_devices

CASES = [Case("toy", "q8_0", rows=64, cols=256, ncols=n) for n in (1, 8)]
# Device 1 is a slower card: its own ceilings, its own times.
CEILINGS = {0: Ceilings(4.0e12, 3.5e12), 1: Ceilings(2.0e12, 1.5e12), 2: Ceilings(4.0e12, 3.5e12)}
US = {0: 10.0, 1: 20.0, 2: 10.0}
PROV = [{"index": i, "name": "NVIDIA H200", "arch": "sm_90",
         "nvml": {"sm_clock_mhz": 1980, "max_sm_clock_mhz": 1980, "memory_clock_mhz": 3201,
                  "power_limit_w": 700.0 - 100 * i}} for i in range(3)]


class IllegalAddress(RuntimeError):
    """Stands in for cupy's CUDARuntimeError after an illegal address in a timed replay."""


def fake_bench_case(family, case, kernels, device, cfg, ceilings, remeasure=None, fault_on=None):
    assert ceilings is CEILINGS[device]  # each device is timed against its own ceilings
    if (device, case.ncols) == fault_on:
        raise IllegalAddress("cudaErrorIllegalAddress: an illegal memory access was encountered")
    return [Timing(case, v, (US[device] * (2 if v == "old" else 1),) * 10, 100, 3, 40_000, 0, ceilings)
            for v in case.variants]


@pytest.fixture
def three_devices(monkeypatch, family_registry):
    fake_three_devices(monkeypatch, family_registry, lambda d: "NVIDIA H200", CASES)
    monkeypatch.setattr("strata_bench.timing.ceilings.measure_ceilings", CEILINGS.__getitem__)
    # The families a run names are those whose source closures it records (results/closures.py).
    monkeypatch.setattr("strata_bench.results.provenance.collect",
                        lambda ids, families: {"devices": [PROV[i] for i in ids], "families": sorted(families)})

    def use(fault_on=None):
        monkeypatch.setattr("strata_bench.timing.bench.bench_case",
                            lambda *a, **k: fake_bench_case(*a, **k, fault_on=fault_on))
    return use


def _run(tmp_path, *args):
    result = CliRunner().invoke(cli, ["bench", "--device", "all", "--results", str(tmp_path), "-q", *args])
    (records_file,) = tmp_path.rglob("bench-*.jsonl")
    (summary_file,) = tmp_path.rglob("bench-*.json")
    records = [json.loads(line) for line in records_file.read_text().splitlines()]
    return result, records, json.loads(summary_file.read_text())


def test_each_device_is_timed_on_its_own(three_devices, tmp_path):
    three_devices()
    result, records, summary = _run(tmp_path)
    assert result.exit_code == 0, result.output
    assert [(r["device"], r["ncols"], r["variant"], r["median_us"]) for r in records] == [
        (d, n, v, US[d] * (2 if v == "old" else 1)) for d in range(3) for n in (1, 8) for v in ("old", "new")]
    # Each device's fraction is against its own read ceiling: 40 kB in 10 us = 4 GB/s of 4 TB/s.
    assert {r["device"]: r["frac_read"] for r in records if r["variant"] == "new"} == {0: 1e-3, 1: 1e-3, 2: 1e-3}
    assert {d: (c["read_bps"], c["copy_bps"]) for d, c in summary["summary"]["ceilings"].items()} == \
        {str(d): (c.read_bps, c.copy_bps) for d, c in CEILINGS.items()}
    assert [d["ceilings"]["read_bps"] for d in summary["summary"]["per_device"]] == [4.0e12, 2.0e12, 4.0e12]
    # The footer names each device's ceilings.
    assert "device 1: ceilings: read 2.00, write -, copy 1.50 TB/s (best of a kernel sweep; given)" in result.stdout
    assert [(d["device"], d["timings"], d["not_timed"], d["fault"]) for d in summary["summary"]["per_device"]] == [
        (0, 4, 0, None), (1, 4, 0, None), (2, 4, 0, None)]
    assert summary["provenance"]["devices"] == PROV and summary["provenance"]["families"] == ["toy"]
    # A row per device and call in the pivot, and a provenance line per device.
    assert "device 1: toy/q8_0/64x256" in result.stdout and "device 2: toy/q8_0/64x256" in result.stdout
    assert ("device 1: NVIDIA H200 (sm_90), SM clock 1980 MHz (max 1980 MHz), memory clock 3201 MHz, "
            "power limit 600 W; read ceiling 2000 GB/s, copy ceiling 1500 GB/s; 4 rows, 0 not timed") in result.stderr


def test_a_fault_on_device_1_leaves_devices_0_and_2_whole(three_devices, tmp_path):
    three_devices(fault_on=(1, 1))
    result, records, summary = _run(tmp_path)
    assert result.exit_code == 1, result.output
    assert [(r["device"], r["ncols"], r["status"][:12]) for r in records] == (
        [(0, n, "timed") for n in (1, 1, 8, 8)] + [(1, 1, "kernel fault")] * 2
        + [(2, n, "timed") for n in (1, 1, 8, 8)])
    assert records[4]["status"] == ("kernel fault: kernel fault in toy/q8_0/64x256/n1/seed:1 on device 1: "
                                    "cudaErrorIllegalAddress: an illegal memory access was encountered")
    per_device = summary["summary"]["per_device"]
    assert [(d["timings"], d["not_timed"]) for d in per_device] == [(4, 0), (2, 2), (4, 0)]
    assert per_device[1]["fault"] == records[4]["status"]
    assert summary["failures"] == 2
    assert "bench: kernel fault in toy/q8_0/64x256/n1/seed:1 on device 1; the other devices' timings are kept" \
        in result.stderr


def test_a_rejected_variant_names_its_device():
    from strata_bench.cli.bench import _raise_for_rejected
    from strata_bench.errors import CheckFailed
    from strata_bench.timing.verify import TIMED_OUTPUT_DIFFERS

    good = fake_bench_case(None, CASES[0], None, 0, None, CEILINGS[0])
    bad = Timing(CASES[1], "new", (5.0,), 1, 3, 40_000, 0, CEILINGS[2], status=TimingStatus(BenchStatus.OUTPUT_DIFFERS, "copy 1"))
    with pytest.raises(CheckFailed, match=rf"^1 timed variant\(s\) rejected; first: {CASES[1].name} on device 2: "
                                          rf"{TIMED_OUTPUT_DIFFERS}: copy 1$"):
        _raise_for_rejected(good + [bad], [0, 0, 2])


FAULT_DATA = __import__("pathlib").Path(__file__).parent.parent / "data" / "fault_family"


@pytest.mark.gpu
def test_bench_device_all_on_this_host(tmp_path):
    """On the GPUs present: every device times fault_demo's first case with its own ceilings and provenance
    line, and each device's fault (the second case faults everywhere) stops only that device."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-m", "strata_bench", "bench", "--kernels", str(FAULT_DATA), "--cases",
         str(FAULT_DATA / "cases.py"), "--family", "fault_demo", "--device", "all", "--budget", "0.2",
         "--results", str(tmp_path), "-q"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    count = gpu.probe().count
    (records_file,) = tmp_path.rglob("bench-*.jsonl")
    records = [json.loads(line) for line in records_file.read_text().splitlines()]
    assert [(r["device"], r["status"][:12]) for r in records] == [
        (d, s) for d in range(count) for s in ("timed", "timed", "kernel fault", "kernel fault")]
    (summary_file,) = tmp_path.rglob("bench-*.json")
    summary = json.loads(summary_file.read_text())
    per_device = summary["summary"]["per_device"]
    assert [(d["device"], d["timings"], d["not_timed"]) for d in per_device] == [(d, 4, 2) for d in range(count)]
    assert all(d["ceilings"]["read_bps"] > 1e11 for d in per_device)
    assert [d["index"] for d in summary["provenance"]["devices"]] == list(range(count))
    for d in range(count):
        assert f"device {d}: " in proc.stderr and "power limit" in proc.stderr
    assert "bench: kernel fault in fault_demo/f32/1x1024/n1/seed:1/fault=1 on device 0" in proc.stderr
