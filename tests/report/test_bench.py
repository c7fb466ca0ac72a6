"""The bench tables on hand-built records: the pull-request pivot and the per-variant detail, exactly."""
from __future__ import annotations

import json

from strata_bench.report import bench


def _record(case, variant, ncols, us, gbps, frac, status="timed", params=None):
    """A bench record as timing writes it; min/max/copy fractions follow from the median and read fraction."""
    return {"case": case, "family": "mmvq", "format": "iq2_xxs", "rows": 4096, "cols": 4096, "params": params or {},
            "ncols": ncols, "variant": variant, "status": status, "median_us": us, "min_us": us and us * 0.99,
            "max_us": us and us * 1.02, "ci_rel": 0.004, "gbps": gbps, "frac_read": frac,
            "frac_copy": frac and frac * 1.1, "tflops": 0.5}


# Two calls: a plain mat-vec at 1 and 8 columns (old and new), and one with a parameter whose
# 8-column run was not timed. Speedups by hand: 20/10 = 2.00x, 40/32 = 1.25x.
RECORDS = [_record("c1", "old", 1, 20.0, 400.0, 0.1), _record("c1", "new", 1, 10.0, 800.0, 0.2),
           _record("c8", "old", 8, 40.0, 300.0, 0.075), _record("c8", "new", 8, 32.0, 375.0, 0.09375),
           _record("g1", "old", 1, 5.0, 100.0, 0.25, params={"experts": 8}),
           _record("g8", "old", 8, None, None, None, status="skipped: too big", params={"experts": 8})]

MARKDOWN = (
    "Old / new per call (speedup, new's GB/s and fraction of the ceiling that bounds it)\n"
    '\n'
    '|                                  | n=1                                          | n=8                                         |\n'
    '|:---------------------------------|:---------------------------------------------|:--------------------------------------------|\n'
    '| mmvq/iq2_xxs/4096x4096           | 20.00 / 10.00 us (2.00x, 800 GB/s, 20% read) | 40.00 / 32.00 us (1.25x, 375 GB/s, 9% read) |\n'
    '| mmvq/iq2_xxs/4096x4096/experts=8 | 5.00 us                                      | not timed: skipped: too big                 |\n'
    '\n'
    '| case   | variant   | status           |   median_us |   min_us |   max_us |   ci_% |   GB/s | ceiling   |   %ceiling |   TFLOP/s |\n'
    '|:-------|:----------|:-----------------|------------:|---------:|---------:|-------:|-------:|:----------|-----------:|----------:|\n'
    '| c1     | old       | timed            |       20.00 |    19.80 |    20.40 |   0.40 | 400.00 | read      |      10.00 |      0.50 |\n'
    '| c1     | new       | timed            |       10.00 |     9.90 |    10.20 |   0.40 | 800.00 | read      |      20.00 |      0.50 |\n'
    '| c8     | old       | timed            |       40.00 |    39.60 |    40.80 |   0.40 | 300.00 | read      |       7.50 |      0.50 |\n'
    '| c8     | new       | timed            |       32.00 |    31.68 |    32.64 |   0.40 | 375.00 | read      |       9.38 |      0.50 |\n'
    '| g1     | old       | timed            |        5.00 |     4.95 |     5.10 |   0.40 | 100.00 | read      |      25.00 |      0.50 |\n'
    '| g8     | old       | skipped: too big |      nan    |   nan    |   nan    |   0.40 | nan    | read      |     nan    |      0.50 |'
)

PIVOT_CSV = (
    ',n=1,n=8\n'
    'mmvq/iq2_xxs/4096x4096,"20.00 / 10.00 us (2.00x, 800 GB/s, 20% read)","40.00 / 32.00 us (1.25x, 375 GB/s, 9% read)"\n'
    'mmvq/iq2_xxs/4096x4096/experts=8,5.00 us,not timed: skipped: too big\n'
    ''
)

TABLE = (
    '                                                       old / new per call                                                        \n'
    '┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓\n'
    '┃ call                             ┃ n=1                                          ┃ n=8                                         ┃\n'
    '┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩\n'
    '│ mmvq/iq2_xxs/4096x4096           │ 20.00 / 10.00 us (2.00x, 800 GB/s, 20% read) │ 40.00 / 32.00 us (1.25x, 375 GB/s, 9% read) │\n'
    '│ mmvq/iq2_xxs/4096x4096/experts=8 │ 5.00 us                                      │ not timed: skipped: too big                 │\n'
    '└──────────────────────────────────┴──────────────────────────────────────────────┴─────────────────────────────────────────────┘\n'
    '                                                   per variant                                                    \n'
    '┏━━━━━━┳━━━━━━━━━┳━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━┳━━━━━━┳━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━┓\n'
    '┃ case ┃ variant ┃ status           ┃ median_us ┃ min_us ┃ max_us ┃ ci_% ┃ GB/s   ┃ ceiling ┃ %ceiling ┃ TFLOP/s ┃\n'
    '┡━━━━━━╇━━━━━━━━━╇━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━╇━━━━━━╇━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━┩\n'
    '│ c1   │ old     │ timed            │ 20.00     │ 19.80  │ 20.40  │ 0.40 │ 400.00 │ read    │ 10.00    │ 0.50    │\n'
    '│ c1   │ new     │ timed            │ 10.00     │ 9.90   │ 10.20  │ 0.40 │ 800.00 │ read    │ 20.00    │ 0.50    │\n'
    '│ c8   │ old     │ timed            │ 40.00     │ 39.60  │ 40.80  │ 0.40 │ 300.00 │ read    │ 7.50     │ 0.50    │\n'
    '│ c8   │ new     │ timed            │ 32.00     │ 31.68  │ 32.64  │ 0.40 │ 375.00 │ read    │ 9.38     │ 0.50    │\n'
    '│ g1   │ old     │ timed            │ 5.00      │ 4.95   │ 5.10   │ 0.40 │ 100.00 │ read    │ 25.00    │ 0.50    │\n'
    '│ g8   │ old     │ skipped: too big │ -         │ -      │ -      │ 0.40 │ -      │ read    │ -        │ 0.50    │\n'
    '└──────┴─────────┴──────────────────┴───────────┴────────┴────────┴──────┴────────┴─────────┴──────────┴─────────┘'
)


def test_markdown_is_the_pivot_then_the_detail():
    assert bench.render(RECORDS, "md") == MARKDOWN


def test_pivot_cells_as_csv():
    assert bench.pivot_frame(RECORDS).to_csv() == PIVOT_CSV


def test_terminal_tables():
    assert bench.render(RECORDS, "table") == TABLE


def test_json_is_the_records():
    assert json.loads(bench.render(RECORDS, "json")) == RECORDS


def test_a_single_variant_shows_its_time_and_a_failed_variant_its_status():
    one = bench.pivot_frame([_record("c1", "new", 1, 12.345, 1.0, 0.1)])
    assert one.to_dict() == {"n=1": {"mmvq/iq2_xxs/4096x4096": "12.35 us"}}
    failed = bench.pivot_frame([_record("c1", "old", 1, 1.0, 1.0, 0.1), _record("c1", "new", 1, None, None, None, "error")])
    assert failed.to_dict() == {"n=1": {"mmvq/iq2_xxs/4096x4096": "not timed: error"}}


def test_a_rejected_variant_shows_why_and_no_speedup():
    # Timed (it has trials) but its outputs differed or its time beat the roofline: never a speedup.
    lazy = {**_record("c1", "new", 1, 4.06, 83597.0, 19.0, "impossible: new at 4.060 us ..."), "trials": 10}
    frame = bench.pivot_frame([{**_record("c1", "old", 1, 266.3, 1270.0, 0.29), "trials": 10}, lazy])
    assert frame.to_dict() == {"n=1": {"mmvq/iq2_xxs/4096x4096": "rejected: impossible: new at 4.060 us ..."}}


def _on(device, records):
    return [{**r, "device": device} for r in records]


def test_records_of_one_device_render_as_before():
    assert bench.render(_on(0, RECORDS), "md") == MARKDOWN


def test_records_of_two_devices_get_a_row_per_device_and_call():
    # The same calls timed on device 0 and on device 1 (which is slower): neither overwrites the other.
    slower = [_record("c1", "old", 1, 40.0, 200.0, 0.05), _record("c1", "new", 1, 20.0, 400.0, 0.1)]
    records = _on(0, RECORDS[:2]) + _on(1, slower)
    assert bench.pivot_frame(records).to_csv() == (
        ',n=1\n'
        'device 0: mmvq/iq2_xxs/4096x4096,"20.00 / 10.00 us (2.00x, 800 GB/s, 20% read)"\n'
        'device 1: mmvq/iq2_xxs/4096x4096,"40.00 / 20.00 us (2.00x, 400 GB/s, 10% read)"\n')
    detail = bench.detail_frame(records)
    assert list(detail.columns[:3]) == ["case", "device", "variant"]
    assert detail[["device", "median_us"]].values.tolist() == [[0, 20.0], [0, 10.0], [1, 40.0], [1, 20.0]]


PROV_DEVICES = [
    {"index": 0, "name": "NVIDIA H200", "arch": "sm_90",
     "nvml": {"sm_clock_mhz": 1980, "max_sm_clock_mhz": 1980, "memory_clock_mhz": 3201, "power_limit_w": 700.0}},
    {"index": 1, "name": "NVIDIA H200", "arch": "sm_90",
     "nvml": {"sm_clock_mhz": 345, "max_sm_clock_mhz": 1980, "memory_clock_mhz": 3201, "power_limit_w": 500.0}},
    {"index": 2, "name": "NVIDIA H200", "arch": "sm_90", "nvml": {"reason": {"all": "NVML not usable"}}},
]


def test_device_lines_give_each_devices_provenance_and_ceilings():
    per_device = [
        {"device": 0, "name": "NVIDIA H200", "timings": 4, "not_timed": 0, "fault": None,
         "ceilings": {"read_bps": 4.3e12, "copy_bps": 3.9e12}},
        {"device": 1, "name": "NVIDIA H200", "timings": 2, "not_timed": 2,
         "fault": "kernel fault: kernel fault in c1 on device 1: cudaErrorIllegalAddress",
         "ceilings": {"read_bps": 4.1e12, "copy_bps": 3.7e12}},
        {"device": 2, "name": "NVIDIA H200", "timings": 0, "not_timed": 0, "fault": None, "ceilings": None},
    ]
    assert bench.device_lines(PROV_DEVICES, per_device) == [
        "device 0: NVIDIA H200 (sm_90), SM clock 1980 MHz (max 1980 MHz), memory clock 3201 MHz, power limit 700 W; "
        "read ceiling 4300 GB/s, copy ceiling 3900 GB/s; 4 rows, 0 not timed",
        "device 1: NVIDIA H200 (sm_90), SM clock 345 MHz (max 1980 MHz), memory clock 3201 MHz, power limit 500 W; "
        "read ceiling 4100 GB/s, copy ceiling 3700 GB/s; 2 rows, 2 not timed; "
        "kernel fault: kernel fault in c1 on device 1: cudaErrorIllegalAddress",
        "device 2: NVIDIA H200 (sm_90), SM clock - (max -), memory clock -, power limit -; "
        "read ceiling -, copy ceiling -; 0 rows, 0 not timed"]


# Records written since issue 12: clocks, sensitivity and flags per variant, a read fraction over 100%.
CLOCKS = {"samples": 3, "sm_mhz": [1965, 1980], "mem_mhz": [3201, 3201], "max_temperature_c": 50,
          "max_power_w": 400.0, "reasons": [], "counters_ns": {}, "throttled": False, "sm_spread": 0.0076}
NEWER = [{**_record("c1", "old", 1, 20.0, 400.0, 0.1), "trials": 40, "clocks": CLOCKS, "sensitivity": 0.0042,
          "flags": []},
         {**_record("c1", "new", 1, 1.9, 4200.0, 1.02), "trials": 38, "sensitivity": 0.0042,
          "clocks": {**CLOCKS, "reasons": ["sw_power_cap"], "throttled": True},
          "flags": ["throttled: sw_power_cap", "above the measured read and copy ceiling (re-measured)"]}]


def test_newer_records_add_clocks_and_sensitivity_columns_and_hide_fractions_over_100():
    frame = bench.detail_frame(NEWER)
    assert list(frame.columns)[-2:] == ["clocks", "sees>=%"]
    assert frame[["ceiling", "%ceiling", "clocks", "sees>=%"]].values.tolist() == [
        ["read", 10.0, "1965-1980 MHz", 0.42], ["read", ">100", "1965-1980 MHz THROTTLED", 0.42]]
    assert bench.pivot_frame(NEWER).to_dict() == {
        "n=1": {"mmvq/iq2_xxs/4096x4096": "20.00 / 1.90 us (10.53x, 4200 GB/s, >100% read, flagged)"}}


def test_the_footer_gives_the_ceilings_each_flag_and_each_case_sensitivity():
    ceilings = ["ceilings: read 4.64, write 4.50, copy 4.40 TB/s, theoretical peak 4.81 TB/s (...)"]
    assert bench.footer_lines(NEWER, ceilings) == ceilings + [
        "c1: could see >= 0.4% (40 + 38 trials)",
        "flag: c1 new: throttled: sw_power_cap",
        "flag: c1 new: above the measured read and copy ceiling (re-measured)"]
    assert bench.render(NEWER, "md", ceilings).endswith(
        "\n\n- " + ceilings[0] + "\n- c1: could see >= 0.4% (40 + 38 trials)\n- flag: c1 new: throttled: "
        "sw_power_cap\n- flag: c1 new: above the measured read and copy ceiling (re-measured)")
    assert bench.render(NEWER, "table", ceilings).splitlines()[-4:] == bench.footer_lines(NEWER, ceilings)
    assert bench.footer_lines(RECORDS) == []  # older records: no footer


def _bounded(case, variant, bound, frac, check):
    return {**_record(case, variant, 1, 10.0, 800.0, 0.2), "bound": bound, "frac_bound": frac, "cold_check": check,
            "rotation": {"hot": check is None}}


COLD_CHECK = {"first_us": 12.0, "again_us": 9.0, "verdict": "cold"}


def test_each_row_shows_only_the_ceiling_that_bounds_it_and_what_the_cold_check_measured():
    """A q8_0 mat-vec over 1.14 GB shows its read fraction, never the copy ceiling it 'beats'; a
    dequantization the copy fraction; a GEMM none; the cache column says what the cold check found."""
    records = [_bounded("mv", "new", "read", 0.97, COLD_CHECK),
               _bounded("dq", "new", "copy", 0.81, {**COLD_CHECK, "verdict": "warm"}),
               _bounded("gemm", "new", None, None, {**COLD_CHECK, "verdict": "cold: one copy exceeds the L2"}),
               _bounded("hot", "new", "read", 0.5, None)]
    frame = bench.detail_frame(records)
    frame = frame.astype(object).where(frame.notna(), None)  # pandas shows a missing cell as nan
    assert frame[["case", "ceiling", "%ceiling", "cache"]].values.tolist() == [
        ["mv", "read", 97.0, "cold"], ["dq", "copy", 81.0, "WARM"], ["gemm", None, None, "cold (copy>L2)"],
        ["hot", "read", 50.0, "hot"]]
    assert "%copy" not in frame.columns and "%read" not in frame.columns
    pair = [{**r, "variant": v} for r, v in zip([records[1], records[1]], ("old", "new"))]
    assert bench.pivot_frame(pair).to_dict() == {
        "n=1": {"mmvq/iq2_xxs/4096x4096": "10.00 / 10.00 us (1.00x, 800 GB/s, 81% copy)"}}
    gemm = [{**records[2], "variant": v} for v in ("old", "new")]
    assert bench.pivot_frame(gemm).to_dict() == {"n=1": {"mmvq/iq2_xxs/4096x4096": "10.00 / 10.00 us (1.00x, 800 GB/s)"}}


def test_markdown_rounds_a_fraction_beside_one_over_100():
    # tabulate's floatfmt skips a column holding any text: %ceiling printed 29.95230584604026 beside ">100".
    records = [{**NEWER[0], "frac_read": 0.2995230584604026}, NEWER[1]]
    detail = bench.render(records, "md").split("\n\n")[2]
    assert detail.splitlines()[2:] == [
        "| c1     | old       | timed    |       20.00 |    19.80 |    20.40 |   0.40 |  400.00 | read      | 29.95      |      0.50 | 1965-1980 MHz           |      0.42 |",
        "| c1     | new       | timed    |        1.90 |     1.88 |     1.94 |   0.40 | 4200.00 | read      | >100       |      0.50 | 1965-1980 MHz THROTTLED |      0.42 |"]
