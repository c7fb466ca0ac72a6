"""Which measurement conditions two files' provenance shares: device, driver, clocks policy, kernels_src."""
from __future__ import annotations

import copy

from strata_bench.results.guard import Difference, check_conditions, refusal

PROV = {"cuda": {"driver": "13.0", "nvml_driver": "580.159.04"}, "kernels_src_hash": "2022c4b36bf5408eefbc",
        "devices": [{"name": "NVIDIA H200", "arch": "sm_90", "pci_bus_id": "00000000:00:06.0",
                     "nvml": {"max_sm_clock_mhz": 1980, "max_memory_clock_mhz": 3201, "power_limit_w": 700.0,
                              "sm_clock_mhz": 345}}]}


def _edited(**changes):
    prov = copy.deepcopy(PROV)
    for path, value in changes.items():
        where = prov
        *parents, last = path.split("__")
        for p in parents:
            where = where[int(p)] if isinstance(where, list) else where[p]
        where[last] = value
    return prov


def test_same_conditions_whatever_the_bus_id_or_current_clock():
    other = _edited(devices__0__pci_bus_id="00000000:00:07.0", devices__0__nvml__sm_clock_mhz=1980)
    assert check_conditions(PROV, other) == ((), ())


def test_each_condition_named_with_both_values():
    diffs, _ = check_conditions(PROV, _edited(kernels_src_hash="3a5f0000000000000000"))
    assert diffs == (Difference("kernels_src hash", "2022c4b36bf5", "3a5f00000000"),)
    diffs, _ = check_conditions(PROV, _edited(cuda__nvml_driver="570.86.15", devices__0__name="NVIDIA H100"))
    assert [str(d) for d in diffs] == ["device (OLD NVIDIA H200 (sm_90), NEW NVIDIA H100 (sm_90))",
                                       "driver (OLD 580.159.04, NEW 570.86.15)"]
    diffs, _ = check_conditions(PROV, _edited(devices__0__nvml__power_limit_w=500.0))
    assert [str(d) for d in diffs] == [
        "clocks policy (OLD max SM 1980 MHz, max memory 3201 MHz, power limit 700.0 W, "
        "NEW max SM 1980 MHz, max memory 3201 MHz, power limit 500.0 W)"]
    assert refusal(diffs[:1]).startswith("compare: OLD and NEW were measured under different conditions: "
                                         "clocks policy (OLD max SM 1980 MHz")
    assert refusal(diffs[:1]).endswith("; pass --allow-different to compare them anyway")


def test_conditions_a_file_does_not_record_are_listed_unchecked():
    diffs, unchecked = check_conditions(PROV, {"kernels_src_hash": PROV["kernels_src_hash"]})
    assert diffs == () and unchecked == ("device (not in NEW)", "driver (not in NEW)", "clocks policy (not in NEW)")
    assert check_conditions({}, None)[1] == ("device (not in either file)", "driver (not in either file)",
                                             "clocks policy (not in either file)",
                                             "kernels_src hash (not in either file)")
