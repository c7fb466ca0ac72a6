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


def _sources(**families: dict[str, str]) -> dict:
    """provenance["sources"] of families given as {file: sha256}."""
    from strata_bench.results.closures import ClosureRecord, Unit

    return {name: ClosureRecord(tuple(sorted(files.items())), (Unit(next(iter(files)), ("kernels_src",)),)).to_json()
            for name, files in families.items()}


MMVQ = {"kernels_src/mmvq/mmvq.cu": "a" * 64, "kernels_src/formats/q8_1.cuh": "b" * 64}


def test_closures_compare_only_the_families_both_files_measured():
    old = _edited(sources=_sources(mmvq=MMVQ, q2warp={"kernels_src/q2warp/q2warp.cu": "c" * 64}))
    new = _edited(sources=_sources(mmvq=MMVQ, q2warp={"kernels_src/q2warp/q2warp.cu": "d" * 64}),
                  kernels_src_hash="3a5f0000000000000000")
    new["sources"].pop("q2warp")
    assert check_conditions(old, new) == ((), ())  # q2warp is only in OLD; kernels_src no longer counts


def test_a_family_whose_closure_differs_is_named_with_its_files():
    old = _edited(sources=_sources(mmvq=MMVQ))
    new = _edited(sources=_sources(mmvq={**MMVQ, "kernels_src/mmvq/mmvq.cu": "e" * 64}))
    (diff,), unchecked = check_conditions(old, new)
    assert unchecked == ()
    assert str(diff) == (f"mmvq sources: kernels_src/mmvq/mmvq.cu changed (OLD {old['sources']['mmvq']['hash'][:12]}, "
                         f"NEW {new['sources']['mmvq']['hash'][:12]})")


def test_files_without_a_family_in_common_or_without_closures():
    old = _edited(sources=_sources(mmvq=MMVQ))
    new = _edited(sources=_sources(q2warp={"kernels_src/q2warp/q2warp.cu": "c" * 64}))
    assert check_conditions(old, new) == ((), ("sources (no family in both files)",))
    # One file without closures (written before them): the kernels_src hash judges, as it always did.
    diffs, _ = check_conditions(old, _edited(kernels_src_hash="3a5f0000000000000000"))
    assert diffs == (Difference("kernels_src hash", "2022c4b36bf5", "3a5f00000000"),)
