"""The --shape/--cols sweep over the default cases, as bench, ab and parity apply it."""
from __future__ import annotations

from strata_bench.cases import Case, CaseFilter
from strata_bench.cases.sweep import sweep, sweep_cases
from strata_bench.cases.spec import RunSpec
from strata_bench.runner.loop import prepare

MMVQ_FORMATS = ("iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m", "iq4_nl", "iq4_xs", "q8_0", "q2_0")


def _mmvq(formats=()):
    return prepare(RunSpec(CaseFilter(families=("mmvq",), formats=formats), purpose="bench")).cases


def test_sweep_replaces_the_shape_and_the_column_count():
    case = Case("mmvq", "iq2_xxs", rows=4096, cols=14336, ncols=2)
    assert [c.name for c in sweep(case, (131072, 8192), (1, 8))] == [
        "mmvq/iq2_xxs/131072x8192/n1/seed:1", "mmvq/iq2_xxs/131072x8192/n8/seed:1"]
    assert sweep(case, None, None) == [case]
    assert [c.name for c in sweep(case, None, (4,))] == ["mmvq/iq2_xxs/4096x14336/n4/seed:1"]


def test_the_dram_sweep_of_one_format_collapses_its_shapes_and_columns():
    base = _mmvq(("iq2_xxs",))
    assert [c.name for c in base] == [f"mmvq/iq2_xxs/{shape}/n{n}/seed:1" for shape in ("131072x8192", "4096x14336")
                                      for n in (1, 2, 4, 8)]
    assert [c.name for c in sweep_cases(base, (131072, 8192), (1, 8))] == [
        "mmvq/iq2_xxs/131072x8192/n1/seed:1", "mmvq/iq2_xxs/131072x8192/n8/seed:1"]
    assert [c.name for c in sweep_cases(base, None, (1, 8))] == [
        "mmvq/iq2_xxs/131072x8192/n1/seed:1", "mmvq/iq2_xxs/131072x8192/n8/seed:1",
        "mmvq/iq2_xxs/4096x14336/n1/seed:1", "mmvq/iq2_xxs/4096x14336/n8/seed:1"]
    assert [c.name for c in sweep_cases(base, (8192, 4096), None)] == [
        f"mmvq/iq2_xxs/8192x4096/n{n}/seed:1" for n in (1, 2, 4, 8)]


def test_the_issue_sweep_is_every_mmvq_format_at_one_and_eight_columns():
    # `bench --family mmvq --shape 131072x8192 --cols 1,8`, the figures the issue's speed check compares.
    cases = sweep_cases(_mmvq(), (131072, 8192), (1, 8))
    assert [c.name for c in cases] == [f"mmvq/{fmt}/131072x8192/n{n}/seed:1" for fmt in MMVQ_FORMATS for n in (1, 8)]
    assert {c.variants for c in cases} == {("old", "new")}
