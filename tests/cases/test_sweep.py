"""The --shape/--cols sweep over the default cases, as bench, ab and parity apply it."""
from __future__ import annotations

from strata_bench.cases import Case, CaseFilter
from strata_bench.cases.sweep import sweep, sweep_cases
from strata_bench.cases.spec import RunSpec
from strata_bench.runs.prepare import prepare

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


# --shape over fixture cases: their real rows keep their own shape, so the sweep leaves them out, in one line
# (the README's `parity --family mmvq --shape 2560x12288 --cols 1,8` relabelled 22 of them and exited 2 on the GPU)

def _list(*args):
    from click.testing import CliRunner

    from strata_bench.cli.main import cli

    return CliRunner().invoke(cli, ["parity", "--family", "mmvq", *args, "--list"])


def test_a_shape_sweep_leaves_the_fixture_cases_out_and_says_how_many():
    result = _list("--shape", "2560x12288", "--cols", "1,8")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [f"mmvq/{fmt}/2560x12288/n{n}/{data}" for fmt in MMVQ_FORMATS
                                          for data in ("seed:1", "edge:2") for n in (1, 8)]
    assert result.stderr.splitlines() == [
        "--shape 2560x12288: 22 fixture cases left out (real weights keep their own shape: --fixtures with --cols "
        "runs them)",
        "44 cases selected, 0 of them on real weights (0 fixtures)"]


def test_the_fixture_cases_keep_their_shape_under_cols_alone():
    result = _list("--cols", "1,8", "-k", "iq2_xxs")
    assert result.exit_code == 0, result.output
    assert [line for line in result.stdout.splitlines() if "fixture:" in line] == [
        f"mmvq/iq2_xxs/64x1536/n{n}/fixture:smollm2-ffn_down.iq2_xxs" for n in (1, 8)]


def test_a_shape_sweep_of_fixture_cases_alone_is_a_usage_error():
    result = _list("--shape", "2560x12288", "-k", "fixture")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "--shape 2560x12288: every selected case is on a fixture's real weights, whose shape is their own; leave "
        "out --shape (--cols alone sweeps them)"]
