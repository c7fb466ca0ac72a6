"""Clocks and throttling without a GPU: a fake NVML module, the summary of a case's readings, and bench
recording them (with the rotation against the L2, the sensitivity and the one re-measured ceiling)."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from strata_bench.cases import Case
from strata_bench.gpu import nvml
from strata_bench.timing.bench import TimingConfig, bench_case
from strata_bench.timing.ceilings import Ceilings
from strata_bench.timing.clocks import ClockReader, ClockSample, ClockSummary, reason_names, summarize


class FakeNvml:
    """pynvml's calls that clocks.py makes; each read of the SM clock takes the next planted value."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
    NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL = 0, 1

    def __init__(self, sm=(1980,), reasons=(0x1,), power_ns=(0,)):
        self.sm, self.reasons, self.power_ns = list(sm), list(reasons), list(power_ns)

    def _next(self, values):
        return values.pop(0) if len(values) > 1 else values[0]

    def nvmlDeviceGetHandleByIndex(self, i): return ("handle", i)
    def nvmlDeviceGetHandleByPciBusId(self, bus): return ("handle", bus)
    def nvmlDeviceGetClockInfo(self, h, kind): return self._next(self.sm) if kind == 1 else 3201
    def nvmlDeviceGetTemperature(self, h, sensor): return 51
    def nvmlDeviceGetPowerUsage(self, h): return 401_500
    def nvmlDeviceGetCurrentClocksEventReasons(self, h): return self._next(self.reasons)

    def nvmlDeviceGetViolationStatus(self, h, policy):
        if policy == self.NVML_PERF_POLICY_THERMAL:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return SimpleNamespace(referenceTime=0, violationTime=self._next(self.power_ns))


@pytest.fixture
def fake_nvml(monkeypatch):
    def install(**kw):
        nv = FakeNvml(**kw)
        monkeypatch.setattr(nvml, "NVML_STATE", {"module": nv})
        return nv
    return install


def test_a_reading_through_nvml(fake_nvml):
    fake_nvml(reasons=(0x1 | 0x4,), power_ns=(1500,))
    assert ClockReader(0).read() == ClockSample(1980, 3201, 51, 401.5, 0x5, {"POWER": 1500})


def test_without_nvml_there_are_no_readings_and_the_summary_says_why(monkeypatch):
    monkeypatch.setattr(nvml, "NVML_STATE", {"error": "NVML not usable (no driver)"})
    reader = ClockReader(0)
    assert reader.read() is None
    summary = reader.summary([None, None])
    assert summary == ClockSummary(0, unavailable="NVML not usable (no driver)")
    assert not summary.throttled and summary.text() == "no clocks"


def test_idle_and_application_clocks_are_not_throttling_power_cap_and_thermal_are():
    assert reason_names(0x1 | 0x2 | 0x10 | 0x100) == ()
    assert reason_names(0x4 | 0x20 | 0x40) == ("sw_power_cap", "sw_thermal", "hw_thermal")


def test_the_summary_of_a_case_spread_peaks_reasons_and_counter_growth():
    samples = [ClockSample(1980, 3201, 48, 380.0, 0x1, {"POWER": 10}),
               ClockSample(1830, 3201, 55, 700.0, 0x4, {"POWER": 2_000_010}),
               ClockSample(1905, 3201, 53, 650.0, 0x0, {"POWER": 3_000_010})]
    s = summarize(samples)
    assert s == ClockSummary(3, (1830, 1980), (3201, 3201), 55, 700.0, ("sw_power_cap",), {"POWER": 3_000_000})
    assert s.throttled and s.sm_spread == pytest.approx(150 / 1980)
    assert s.throttle_text() == "throttled: sw_power_cap, POWER +3.0 ms" and s.text() == "1830-1980 MHz"
    assert ClockSummary.from_dict(s.to_dict()) == s
    quiet = summarize(samples[:1])
    assert not quiet.throttled and quiet.throttle_text() == "" and quiet.text() == "1980 MHz"


CASE = Case("toy", "f32", rows=1, cols=4, variants=("old", "lazy"))
CFG = TimingConfig(min_trials=10, max_trials=25, graph_target_s=60e-6)


def test_bench_reads_the_clocks_during_the_trials_and_flags_a_throttled_variant(graph_standin, fake_nvml):
    # The "old" variant's trials see 1980 MHz; the "lazy" one's a power cap at its last reading.
    fake_nvml(reasons=(0x1, 0x1, 0x1, 0x4))
    family = graph_standin.LazyFamily(honest=10**6)
    timings = bench_case(family, CASE, None, 0, CFG, Ceilings(4e12, 5e12), clocks=ClockReader(0))
    # 10 trials (equal samples): readings after replays 0 and the last: 2 readings each.
    assert [(t.variant, t.clocks.samples, t.clocks.reasons) for t in timings] == [
        ("old", 2, ()), ("lazy", 2, ("sw_power_cap",))]
    assert timings[1].flags == ("throttled: sw_power_cap",)
    record = timings[1].to_record()
    assert record["clocks"]["throttled"] is True and record["flags"] == ["throttled: sw_power_cap"]
    assert record["rotation"] == {"copies": 3, "bytes_per_copy": 1016, "l2_bytes": 1000,
                                  "l2_multiple": 3.048, "hot": False, "warning": ""}
    assert record["l2_reset"].startswith(("reset", "not reset"))
    assert record["sensitivity"] == 0.0  # equal samples: a CI of width 0


def test_a_rotation_below_3x_the_l2_is_flagged_unless_hot(graph_standin, fake_nvml):
    fake_nvml()
    family = graph_standin.LazyFamily(honest=10**6)
    import sys

    sys.modules["cupy"].cuda.runtime.getDeviceProperties = lambda device: {"l2CacheSize": 10**6}
    warm = bench_case(family, CASE, None, 0, CFG, Ceilings(4e12, 5e12), clocks=ClockReader(0))
    # The rotation's size says warm, and so does its measurement (the stand-in's replays take the same time).
    assert warm[0].flags == ("warm: rotation 64 x 1016 B is 0.07x the L2, below 3x",
                             "warm: a copy's first replay (1.00 us) was not slower than its immediate re-replay "
                             "(1.00 us) over 64 pairs: the L2 may have served the timed reads")
    hot = bench_case(family, CASE, None, 0, replace(CFG, hot=True), Ceilings(4e12, 5e12), clocks=ClockReader(0))
    assert hot[0].flags == () and hot[0].to_record()["rotation"]["hot"] is True
    assert hot[0].cold_check is None  # --hot: no copies to compare


def test_a_variant_above_the_ceiling_re_measures_once_then_is_flagged(graph_standin, fake_nvml):
    # 4100 bytes per 1 us launch is 4.1 GB/s: above a 4.0 GB/s read ceiling, within the 3% slack.
    fake_nvml()
    family = graph_standin.LazyFamily(honest=10**6, bytes_per_call=4100)
    calls = []

    def remeasure():
        calls.append(1)
        return Ceilings(4.05e3 * 1e6, 5e9, source="re-measured")

    timings = bench_case(family, CASE, None, 0, CFG, Ceilings(4e9, 5e9), remeasure=remeasure,
                         clocks=ClockReader(0))
    assert calls == [1]
    assert [(str(t.status), t.flags) for t in timings] == [
        ("timed", ("above the measured read ceiling (re-measured)",))] * 2
    assert timings[0].to_record()["frac_read"] > 1 and timings[0].ceilings.source == "re-measured"
    # A re-measured ceiling the kernel no longer beats: no flag.
    ok = bench_case(family, CASE, None, 0, CFG, Ceilings(4e9, 5e9), remeasure=lambda: Ceilings(4.2e9, 5e9),
                    clocks=ClockReader(0))
    assert [t.flags for t in ok] == [(), ()]
