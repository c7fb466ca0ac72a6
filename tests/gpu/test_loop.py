"""The case loop: every case on every device, results kept as they arrive, a device stopped at its first
fault (with host stand-ins), and on a GPU a kernel fault that names its case and exits 1."""
from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from strata_bench.cases import Case
from strata_bench.errors import InputError, KernelFault
from strata_bench.gpu import loop
from strata_bench.gpu.devices import probe
from strata_bench.gpu.loop import run_on_devices

DATA = Path(__file__).parent.parent / "data" / "fault_family"



def test_kernels_without_a_case_file_is_an_input_error():
    from strata_bench.cases.extensions import extensions_from

    with pytest.raises(InputError, match="--kernels my_kernels needs --cases FILE.py"):
        extensions_from({"kernels_dir": "my_kernels"})


def test_each_device_runs_every_case_until_its_first_fault(monkeypatch, family_registry):
    family_registry["toy"] = family = SimpleNamespace(name="toy")
    cases = [Case("toy", "q8_0", rows=1, cols=32, data=f"seed:{i}") for i in range(3)]
    entered, loaded = [], []

    @contextlib.contextmanager
    def device(index):
        entered.append(index)
        yield

    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(cuda=SimpleNamespace(Device=device)))
    monkeypatch.setattr(loop, "precompile", lambda c, d, catalog: loaded.append(("precompile", len(c), d)))
    monkeypatch.setattr("strata_bench.kernels.build.load_kernels", lambda fam, dev: loaded.append((fam.name, dev)))

    def per_case(fam, case, kernels, dev):
        assert fam is family
        if dev == 1 and case is cases[1]:
            raise KernelFault("boom")
        return (dev, case.data)

    results, ticks = [], []
    run_on_devices(cases, [0, 1], family_registry, per_case, results.append,
                   lambda case, dev, exc, seconds: (dev, case.data, str(exc)), lambda: ticks.append(1))
    assert entered == [0, 1]
    assert loaded == [("precompile", 3, [0, 1])] + [("toy", 0)] * 3 + [("toy", 1)] * 2
    # Device 1 faults on its second case: the fault is kept and its third case is not run.
    assert results == [(0, "seed:0"), (0, "seed:1"), (0, "seed:2"), (1, "seed:0"), (1, "seed:1", "boom")]
    assert len(ticks) == 4  # progress advances for cases that finished, not for the fault


@pytest.fixture
def fake_three_devices(monkeypatch, family_registry):
    """Three fake devices (no CUDA): the device contexts entered are recorded, kernels load as None."""
    family_registry["toy"] = SimpleNamespace(name="toy")
    entered = []

    @contextlib.contextmanager
    def device(index):
        entered.append(index)
        yield

    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(cuda=SimpleNamespace(Device=device)))
    monkeypatch.setattr(loop, "precompile", lambda c, d, catalog: None)
    monkeypatch.setattr("strata_bench.kernels.build.load_kernels", lambda fam, dev: None)
    return [Case("toy", "q8_0", rows=1, cols=32, data=f"seed:{i}") for i in range(4)], entered


class IllegalAddress(RuntimeError):
    """Stands in for cupy's CUDARuntimeError after an illegal address (a sticky fault)."""


def test_a_fault_on_device_1_leaves_devices_0_and_2_whole(fake_three_devices):
    cases, entered = fake_three_devices

    def per_case(fam, case, kernels, dev):
        if dev == 1 and case is cases[2]:
            raise IllegalAddress("cudaErrorIllegalAddress: an illegal memory access was encountered")
        return (dev, case.data)

    results, faults = [], []

    def on_fault(case, dev, exc, seconds):
        faults.append(exc)
        return (dev, case.data, "FAULT")

    run_on_devices(cases, [0, 1, 2], {"toy": SimpleNamespace(name="toy")}, per_case, results.append, on_fault)
    assert entered == [0, 1, 2]
    every = [f"seed:{i}" for i in range(4)]
    assert [r[1] for r in results if r[0] == 0] == every
    assert [r[1] for r in results if r[0] == 2] == every
    assert [r for r in results if r[0] == 1] == [(1, "seed:0"), (1, "seed:1"), (1, "seed:2", "FAULT")]
    # The unwrapped sticky error became a KernelFault naming the case and the device, with its cause.
    (fault,) = faults
    assert isinstance(fault, KernelFault) and isinstance(fault.__cause__, IllegalAddress)
    assert str(fault) == ("kernel fault in toy/q8_0/1x32/n1/seed:2 on device 1: "
                          "cudaErrorIllegalAddress: an illegal memory access was encountered")


def test_an_error_that_is_not_a_fault_stops_the_run(fake_three_devices):
    cases, entered = fake_three_devices

    def per_case(fam, case, kernels, dev):
        if dev == 1:
            raise ValueError("a bug in a family, not a fault")
        return dev

    results = []
    with pytest.raises(ValueError, match="a bug in a family"):
        run_on_devices(cases, [0, 1, 2], {"toy": SimpleNamespace(name="toy")}, per_case, results.append, lambda *a: pytest.fail("not a fault"))
    assert results == [0, 0, 0, 0] and entered == [0, 1]


@pytest.mark.gpu
@pytest.mark.skipif(not probe().usable, reason=f"needs a usable CUDA GPU ({probe().reason})")
def test_fault_is_named_and_earlier_results_are_kept(tmp_path):
    # A child process: the fault leaves its CUDA context unusable, and this test's process must go on.
    proc = subprocess.run(
        [sys.executable, "-m", "strata_bench", "parity", "--kernels", str(DATA), "--cases", str(DATA / "cases.py"),
         "--family", "fault_demo", "--results", str(tmp_path), "-q"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "fault_demo/f32/1x1024/n1/seed:1/fault=1" in proc.stdout + proc.stderr
    (records_file,) = tmp_path.rglob("parity-*.jsonl")
    records = [json.loads(line) for line in records_file.read_text().splitlines()]
    assert [r["status"] for r in records] == ["PASS", "FAULT"]
    (summary,) = tmp_path.rglob("parity-*.json")
    assert json.loads(summary.read_text())["failures"] == 1


@pytest.mark.gpu
@pytest.mark.skipif(not probe().usable, reason=f"needs a usable CUDA GPU ({probe().reason})")
def test_device_all_runs_every_case_on_each_device_after_another_devices_fault(tmp_path):
    # fault_demo's second case faults on every device: each device must still have run its first case,
    # so on a host with two or more GPUs, device 1's PASS was run after device 0's context was lost.
    proc = subprocess.run(
        [sys.executable, "-m", "strata_bench", "parity", "--kernels", str(DATA), "--cases", str(DATA / "cases.py"),
         "--family", "fault_demo", "--device", "all", "--results", str(tmp_path), "-q"],
        capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    count = probe().count
    (records_file,) = tmp_path.rglob("parity-*.jsonl")
    records = [json.loads(line) for line in records_file.read_text().splitlines()]
    assert [(r["device"], r["status"]) for r in records] == [(d, s) for d in range(count) for s in ("PASS", "FAULT")]
    (summary,) = tmp_path.rglob("parity-*.json")
    per_device = json.loads(summary.read_text())["summary"]["per_device"]
    assert [(d["device"], d["cases"], d["failures"], d["faults"]) for d in per_device] == \
        [(d, 2, 1, 1) for d in range(count)]
    assert "parity: kernel fault in fault_demo/f32/1x1024/n1/seed:1/fault=1 on device 0" in proc.stderr
    for d in range(count):
        assert f"device {d} (" in proc.stdout


def test_the_compile_seconds_are_handed_over_before_the_first_case(monkeypatch, family_registry):
    family_registry["toy"] = SimpleNamespace(name="toy")
    cases = [Case("toy", "q8_0", rows=1, cols=32, data="seed:0")]
    clock = iter([10.0, 12.5])
    events = []
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(cuda=SimpleNamespace(Device=lambda i: contextlib.nullcontext())))
    monkeypatch.setattr(loop, "precompile", lambda c, d, catalog: events.append("precompile"))
    monkeypatch.setattr(loop.time, "perf_counter", lambda: next(clock, 20.0))
    monkeypatch.setattr("strata_bench.kernels.build.load_kernels", lambda fam, dev: None)
    run_on_devices(cases, [0], family_registry, lambda *a: events.append("case"), lambda r: None, lambda *a: None,
                   compiled=lambda seconds: events.append(seconds))
    assert events == ["precompile", 2.5, "case"]
