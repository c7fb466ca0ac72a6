"""Ceilings' bookkeeping without a GPU: the sweep's plan and best-of, the theoretical peak, the cache per
device and driver, and the one re-measurement."""
from __future__ import annotations

import json
import math

import pytest

from strata_bench.timing import ceilings as C
from strata_bench.timing.ceilings import Ceilings, Trial


def test_the_theoretical_peak_of_an_h200():
    assert C.theoretical_peak_bps(3201, 6016) == 2 * 3201e6 * 6016 / 8 == 4_814_304_000_000.0
    assert math.isnan(C.theoretical_peak_bps(None, 6016)) and math.isnan(C.theoretical_peak_bps(3201, 0))


def test_the_sweep_is_three_kinds_by_three_unrolls_by_three_grids():
    plan = C.sweep_plan(132)
    assert len(plan) == 27 and plan[:3] == [("read", 1, 264), ("read", 1, 528), ("read", 1, 1056)]
    assert {(k, u) for k, u, _ in plan} == {(k, u) for k in ("read", "write", "copy") for u in (1, 2, 4)}


def test_best_of_keeps_each_kinds_fastest_median_and_its_spread():
    trials = [Trial("read", "x1", (2.0, 2.2, 2.1)), Trial("read", "x4", (1.9, 1.8, 2.0)),
              Trial("copy", "x2", (4.0, 4.0, 4.0)), Trial("copy", "cudaMemcpy", (3.6, 3.8, 3.7))]
    bps, best, spread = C.best_of(trials, {"read": 100, "copy": 200})
    assert bps == {"read": 100 / 1.9, "copy": 200 / 3.7}
    assert best == ("read: x4", "copy: cudaMemcpy")
    assert spread == pytest.approx(max(0.2 / 1.9, 0.2 / 3.7))


def test_the_cache_is_keyed_by_device_and_driver_and_survives_a_bad_file(tmp_path, monkeypatch):
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path))
    assert C.cache_path() == tmp_path / "ceilings.json"
    assert C.load_cached("H200|0000:01:00.0|580.1") is None  # no file
    ceil = Ceilings(4.6e12, 4.4e12, 4.5e12, 4.81e12, 8 << 30, ("read: 16B x4",), 0.01, "measured", "k1")
    C.store_cached("k1", ceil)
    C.store_cached("k2", Ceilings(1e12, 1e12))
    back = C.load_cached("k1")
    assert back == Ceilings(4.6e12, 4.4e12, 4.5e12, 4.81e12, 8 << 30, ("read: 16B x4",), 0.01,
                            back.source, "k1") and back.source.startswith("cached 20")
    assert C.load_cached("k3") is None  # another driver: measured again
    (tmp_path / "ceilings.json").write_text("{not json")
    assert C.load_cached("k1") is None
    (tmp_path / "ceilings.json").write_text(json.dumps({"schema": 0, "entries": {"k1": {}}}))
    assert C.load_cached("k1") is None  # an older schema


def test_measured_once_per_process_from_the_cache_and_re_measured_at_most_once(tmp_path, monkeypatch):
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(C, "_CEILINGS", {})
    monkeypatch.setattr(C, "_REMEASURED", set())
    monkeypatch.setattr(C, "device_key", lambda device: f"dev{device}|driver")
    figures = iter([Ceilings(4.4e12, 4.2e12, 4.3e12, 4.81e12), Ceilings(4.6e12, 4.1e12, 4.5e12, 4.81e12)])
    calls = []

    def measure(device, nbytes):
        calls.append((device, nbytes))
        return next(figures)

    monkeypatch.setattr(C, "_measure", measure)
    first = C.measure_ceilings(0)
    assert (first.read_bps, first.source, first.key) == (4.4e12, "measured", "dev0|driver")
    assert C.measure_ceilings(0) is first and calls == [(0, 8 << 30)]
    C._CEILINGS.clear()
    assert C.measure_ceilings(0).source.startswith("cached") and calls == [(0, 8 << 30)]  # from the file
    again = C.remeasure_ceilings(0)
    # The better figure of each kind is kept: read and write from the new sweep, copy from the first.
    assert (again.read_bps, again.copy_bps, again.write_bps, again.source) == (4.6e12, 4.2e12, 4.5e12, "re-measured")
    assert C.remeasure_ceilings(0) is again and len(calls) == 2
    assert C.load_cached("dev0|driver").read_bps == 4.6e12


def test_the_footer_line():
    ceil = Ceilings(4.64e12, 4.40e12, 4.52e12, 4.814e12, 8 << 30, source="measured")
    assert ceil.text() == ("ceilings: read 4.64, write 4.52, copy 4.40 TB/s, theoretical peak 4.81 TB/s "
                           "(best of a kernel sweep over 8 GiB; measured)")
    assert Ceilings(4e12, 5e12).text() == "ceilings: read 4.00, write -, copy 5.00 TB/s (best of a kernel sweep; given)"


@pytest.mark.gpu
def test_the_sweep_on_the_device_is_honest_repeatable_and_short():
    # On an H200: read >= 4.6 TB/s, below the theoretical peak; two fresh sweeps agree within 1.5%
    # (what ROOFLINE_SLACK assumes); one sweep's work fits 3 s at its own read ceiling (bounded by the
    # passes it makes, not by the clock: a loaded host's wall time says nothing of the sweep).
    import time

    import cupy

    from strata_bench.timing.verify import ROOFLINE_SLACK

    with cupy.cuda.Device(0):
        start = time.perf_counter()
        one = C._measure(0, C.SWEEP_BYTES)
        seconds = time.perf_counter() - start
        two = C._measure(0, C.SWEEP_BYTES)
    print(f"\nsweep {seconds:.2f} s; {one.text()}; best {one.best}; spread {one.spread:.4f}; "
          f"second read {two.read_bps / 1e12:.3f} copy {two.copy_bps / 1e12:.3f} write {two.write_bps / 1e12:.3f}")
    assert one.nbytes >= 8 << 30 or one.nbytes > 0
    passes = (len(C.sweep_plan(cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"])) + 1) * (C.REPS + 1)
    assert passes * 2 * one.nbytes / one.read_bps < 3.0  # each configuration and the memcpy, untimed pass too
    for kind in ("read_bps", "write_bps", "copy_bps"):
        a, b = getattr(one, kind), getattr(two, kind)
        assert abs(a - b) / max(a, b) < 0.015 < ROOFLINE_SLACK, kind
        if math.isfinite(one.peak_bps):
            assert a < one.peak_bps, kind
