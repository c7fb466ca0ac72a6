"""mmvq family: compile, case matrix, column passes and related cases, and the float64 tolerances checked
against the exact per-output arithmetic of mmvq.cu run on the CPU (tests/iq_host)."""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from strata_bench.cases import Case

from strata_bench.families import load_builtin_families
from strata_bench import kit
from strata_bench.families import mmvq as mod
from strata_bench.kit import Q8_1_BYTES

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from iq_host import harness

FAMILY = load_builtin_families()["mmvq"]
ARCHS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_120")


# --- compile ------------------------------------------------------------------------------------------------


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_every_architecture_compiles_a_sample(arch, cubin_cache):
    """dp4a, prmt and the shared-memory tables on every target (a sample; `compile --arch` builds all)."""
    from strata_bench.kernels.build import compile_source

    exprs = [e for e in FAMILY.name_expressions("mmvq/mmvq.cu")
             if ("iq2_xxs" in e or "iq4_xs" in e) and ("old" in e or ", 1," in e or ", 8," in e)]
    compile_source("mmvq/mmvq.cu", exprs, arch)
    compile_source("q8_1/q8_1.cu", ["quantize_q8_1", "q8_1_fields"], arch)


# --- cases ----------------------------------------------------------------------------------------------------
def test_default_cases_cover_every_format_column_count_and_shape():
    cases = list(FAMILY.default_cases())
    for fmt in kit.KERNEL_FORMATS:
        for shape in mod.SHAPES:
            got = sorted(c.ncols for c in cases if c.fmt == fmt and (c.rows, c.cols) == shape and c.data == "seed:1")
            assert got == [1, 2, 3, 4, 5, 6, 7, 8, 11], (fmt, shape)
        assert any(c.fmt == fmt and c.data.startswith("edge") for c in cases)
    fixtures = {c.fmt for c in cases if c.data.startswith("fixture")}
    assert {"iq2_xxs", "iq1_m", "iq4_xs", "q8_0", "q2_0"} <= fixtures
    assert all(c.variants == ("old", "new") for c in cases)
    assert (8192, 2560) in mod.SHAPES and any(r >= 8 * k for r, k in mod.SHAPES)  # the shape and a tall one


def test_default_cases_end_every_format_in_a_partial_row_group():
    cases = list(FAMILY.default_cases())
    for fmt in kit.KERNEL_FORMATS:
        tails = [c.ncols for c in cases if c.fmt == fmt and c.rows % 16 and c.rows < 32768]
        assert tails == [4, 11], fmt  # passes 4 and 8 + 2 + 1; 37 rows: 5 past 2 groups of 16 (or 1 of 32)
    assert mod.TAIL_SHAPE == (37, 1280) and (1280 // 32) % 32 == 8  # lanes 8-31 one chunk fewer


def test_bench_cases_include_the_dram_shape():
    bench = list(FAMILY.bench_cases())
    assert {(c.rows, c.cols) for c in bench} >= {(131072, 8192)}
    assert {c.ncols for c in bench} == {1, 2, 4, 8}
    assert {c.fmt for c in bench} == set(kit.KERNEL_FORMATS)


@pytest.mark.parametrize("ncols,passes", [(1, [1]), (3, [2, 1]), (7, [4, 2, 1]), (8, [8]), (11, [8, 2, 1]),
                                          (16, [8, 8]), (13, [8, 4, 1])])
def test_column_passes_are_8_then_binary(ncols, passes):
    assert mod.column_passes(ncols) == passes
    assert sum(passes) == ncols


def test_related_cases_are_every_column_as_a_one_column_call():
    case = FAMILY.case("iq2_xs", 8192, 2560, 5, "seed:1")
    related = FAMILY.related_cases(case)
    assert [other.param("col") for other, _, _ in related] == [0, 1, 2, 3, 4]
    assert all(other.ncols == 1 and output == "y" for other, output, _ in related)
    y = np.arange(5 * 3).reshape(5, 3)
    assert related[3][2]({"y": y}).tolist() == [[9, 10, 11]]
    assert FAMILY.related_cases(replace(case, ncols=1)) == []


def test_column_case_takes_that_column_of_the_draw():
    case = FAMILY.case("q2_0", 64, 256, 4, "seed:3")
    full = FAMILY.make_inputs(case)
    one = FAMILY.make_inputs(replace(case, ncols=1, params=(("col", 2),)))
    assert np.array_equal(one["x"][0], full["x"][2])
    assert np.array_equal(one["act"][0], full["act"][2])
    assert one["raw"] is full["raw"]  # one cached weight set for every column count


def test_bytes_moved_and_flops():
    case = FAMILY.case("iq2_xxs", 1024, 2560, 2, "seed:1")
    nb = 2560 // 32
    assert FAMILY.bytes_moved(case) == 1024 * 10 * 66 + 2 * (2560 * 4 + 2 * nb * Q8_1_BYTES) + 2 * 1024 * 4
    assert FAMILY.flops(case) == 2 * 1024 * 2560 * 2


def test_shared_memory_of_the_new_kernel():
    assert kit.q8_1_staging_bytes(8, 256) == 8 * 256 * Q8_1_BYTES  # dynamic: the pass's activations
    assert kit.decode_table_bytes("iq1_s") == (2048 + 2) * 4  # static: table and its two constants
    assert kit.decode_table_bytes("q8_0") == 2 * 4 and kit.decode_table_bytes("iq4_nl") == 6 * 4


# --- references against the kernels' own arithmetic, on the CPU -----------------------------------------------------
def _emulated(case: Case) -> tuple[np.ndarray, dict[str, object]]:
    host = FAMILY.make_inputs(case)
    y = harness.run_dot(case.fmt, host["raw"], case.cols, host["act"])
    return y, {r.label: r for r in FAMILY.reference(case, host)}


@pytest.mark.parametrize("fmt", kit.KERNEL_FORMATS)
@pytest.mark.parametrize("data", ["seed:7", "edge:2"])
def test_kernel_arithmetic_is_within_both_tolerances(fmt, data):
    # 1536 inputs: 48 chunks, so lanes 0-15 chain two chunks and lanes 16-31 one.
    case = FAMILY.case(fmt, 24, 1536, 3, data)
    y, refs = _emulated(case)
    for label, ref in refs.items():
        err = np.abs(y.astype(np.float64) - ref.ref)
        assert ref.tol.shape == err.shape  # each output its own bound
        assert (err <= ref.tol).all(), f"{label}: worst |err|/bound {(err / ref.tol).max():.3g}"
        assert ((0 < ref.tol) & (ref.tol < np.inf)).all()


@pytest.mark.parametrize("fmt", ["iq2_xxs", "iq4_nl", "q2_0"])
def test_tolerance_catches_a_dropped_chunk(fmt):
    """A kernel that skipped one chunk of one row must fail the q8_1-activation reference."""
    case = FAMILY.case(fmt, 24, 1536, 1, "seed:7")
    host = FAMILY.make_inputs(case)
    refs = {r.label: r for r in FAMILY.reference(case, host)}
    raw = host["raw"].copy()
    from strata_bench.formats import get_format

    f = get_format(fmt)
    blocks = raw.reshape(24, -1, f.type_size)
    blocks[5, 0, :] = 0  # zero the first block of row 5: its d becomes 0, so its chunks vanish
    y = harness.run_dot(fmt, raw, case.cols, host["act"])
    err = np.abs(y.astype(np.float64) - refs["f64(q8_1 acts)"].ref)
    above = err > refs["f64(q8_1 acts)"].tol
    assert np.flatnonzero(above.any(axis=0)).tolist() == [5]  # row 5 alone, against its own bound


def test_fixture_case_tiles_and_notes_its_source():
    case = FAMILY.case("q2_0", 130, 1536, 1, f"fixture:{mod.fixture_name('q2_0')}")
    host = FAMILY.make_inputs(case)
    assert host["raw"].shape == (130, 1536 // 64 * 18)
    assert np.array_equal(host["raw"][64:128], host["raw"][:64])
    assert "tiled" in host["note"] and "requantized" in host["note"]


# --- launch configs (NewConfig; the tuning candidates are experiments/mmvq_tune's) ----------------------------------
def test_new_config_kernel_names_spell_only_what_differs_from_the_defaults():
    from strata_bench.families.mmvq import NewConfig

    assert NewConfig().kernel("iq2_xxs", 1) == "mmvq_new<siq::fmt_iq2_xxs, 1, 4>"
    assert NewConfig(2, 4, 8).kernel("iq2_xxs", 1) == "mmvq_new<siq::fmt_iq2_xxs, 1, 2, 4, 8>"
    assert NewConfig(2, None, 4, True).kernel("iq3_s", 8) == "mmvq_new<siq::fmt_iq3_s, 8, 2, 2, 4, true>"
    assert NewConfig(old=True).kernel("q8_0", 1) == "mmvq_old<siq::fmt_q8_0>"
    assert NewConfig(4, 3, 4).label == "r4m3u4" and NewConfig(2, 2, 4, True).label == "r2m2u4f"
    assert NewConfig().min_blocks_for(1) == 3 and NewConfig().min_blocks_for(8) == 2
