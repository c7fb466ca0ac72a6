"""What each compute-sanitizer tool runs (gpu/sanitize_scope.py), on the CPU: racecheck and synccheck skip the
variants whose compiled kernels use no shared memory and no barrier (decided from the built-in kernels' real
NVRTC compile records and their text), memcheck and initcheck run every variant; anything unknown is run."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from strata_bench.cases import Case
from strata_bench.cases.case import CaseFilter
from strata_bench.cases.spec import RunSpec
from strata_bench.gpu import sanitize_scope as scope
from strata_bench.kernels import source_scan


@pytest.fixture(scope="module")
def default_plans(tmp_path_factory):
    """Each tool's plan over parity's default cases, the built-in kernels compiled for sm_90 (a private cache)."""
    from strata_bench.kernels import nvrtc
    from strata_bench.runs.prepare import prepare

    try:
        nvrtc.version()
    except nvrtc.NvrtcUnavailable as exc:
        pytest.skip(str(exc))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STRATA_CACHE_DIR", str(tmp_path_factory.mktemp("cubin-cache")))
        prepared = prepare(RunSpec())
        plans = scope.plans(scope.SCOPES, prepared.cases, prepared.catalog, "sm_90")
    return prepared.cases, {plan.tool: plan for plan in plans}


def test_racecheck_skips_the_families_without_shared_memory_or_barriers(default_plans):
    cases, plans = default_plans
    race = plans["racecheck"]
    assert Counter(name.split("/")[0] for name in race.skipped) == {"dequant": 33, "swiglu_q8": 31, "q8_1": 4}
    # mmvq_old, grouped_*_old and the fp16deq generic/vec16 kernels have neither: only the new variant runs.
    assert Counter((name.split("/")[0], variants) for name, variants in race.runs) == {
        ("mmvq", ("new",)): 334, ("grouped", ("new",)): 32, ("fp16deq", ("new",)): 14,
        ("moe_combine", ("old", "new")): 10, ("q2warp", ("old", "new")): 13,
        ("pfgemm", ("old", "new", "auto")): 6, ("pfgemm", ("old", "auto")): 5}
    assert len(race.runs) + len(race.skipped) == len(cases) == 482
    assert race.skip_note() == ", 68 skipped (no kernel of theirs uses shared memory or a barrier)"
    assert plans["synccheck"].runs == race.runs and plans["synccheck"].skipped == race.skipped


def test_memcheck_and_initcheck_run_every_variant_of_every_case(default_plans):
    cases, plans = default_plans
    every = tuple((case.name, case.variants) for case in cases)
    for tool in ("memcheck", "initcheck"):
        assert plans[tool].runs == every and plans[tool].skipped == () and plans[tool].skip_note() == ""
    assert plans["memcheck"].launches == 933 and plans["racecheck"].launches == 454


def test_the_exact_skips_of_a_small_selection(default_plans):
    cases, _plans = default_plans
    from strata_bench.runs.catalog import build_catalog

    chosen = [c for c in cases if CaseFilter(("q8_1", "moe_combine"), (), "/n1/").matches(c)]
    race = scope.plans(["racecheck"], chosen, build_catalog(RunSpec()), "sm_90")[0]
    assert race.skipped == ("q8_1/f32/1x2560/n1/seed:1", "q8_1/f32/11x8192/n1/seed:2", "q8_1/f32/4x2560/n1/edge:3",
                            "q8_1/f32/3x32/n1/edge:4")
    assert [name for name, _v in race.runs] == [c.name for c in chosen if c.family == "moe_combine"]


# --- the predicate and the plan, over stand-in kernels --------------------------------------------------------
@pytest.mark.parametrize("use,sees", [
    (scope.KernelUse("k", 0, 0, False), False),
    (scope.KernelUse("k", 64, 0, False), True),  # static shared memory
    (scope.KernelUse("k", 0, 1, False), True),  # __syncthreads
    (scope.KernelUse("k", 0, 0, True), True),  # extern __shared__ or __syncwarp in its body
    (scope.KernelUse("k", 0, None, False), True),  # a log without the barrier count
    (scope.KernelUse("k", 0, 0, None), True),  # a helper outside the kernels may share or sync
])
def test_a_kernel_is_seen_unless_every_fact_says_no(use, sees):
    assert scope.SCOPES["racecheck"].sees(use) is sees and scope.SCOPES["synccheck"].sees(use) is sees
    assert scope.SCOPES["memcheck"].sees(use) and scope.SCOPES["initcheck"].sees(use)


def test_plan_tool_keeps_unknown_kernels_and_writes_the_child_s_plan(tmp_path):
    plain, shared = scope.KernelUse("plain", 0, 0, False), scope.KernelUse("tiled", 128, 1, False)
    kernels = {"old": [plain], "new": [plain, shared], "theirs": [None], "bare": []}
    cases = [Case("f", "q8_0", 4, 32, variants=("old", "new")), Case("f", "q8_0", 8, 32, variants=("old",)),
             Case("f", "q8_0", 16, 32, variants=("old", "theirs", "bare"))]
    plan = scope.plan_tool("racecheck", cases, lambda case, variant: kernels[variant])
    assert plan.runs == (("f/q8_0/4x32/n1/seed:1", ("new",)), ("f/q8_0/16x32/n1/seed:1", ("theirs", "bare")))
    assert plan.skipped == ("f/q8_0/8x32/n1/seed:1",) and plan.launches == 3
    assert json.loads(plan.write(tmp_path / "plan.json").read_text()) == {
        "f/q8_0/4x32/n1/seed:1": ["new"], "f/q8_0/16x32/n1/seed:1": ["theirs", "bare"]}
    assert scope.read_plan({scope.PLAN_ENV: str(tmp_path / "plan.json")}) == json.loads((tmp_path / "plan.json").read_text())
    assert scope.read_plan({}) is None


def test_sync_text_names_the_kernels_and_a_helper_outside_them(tmp_path):
    (tmp_path / "helper.cuh").write_text("__device__ void stage() { __syncwarp(); }\n")
    (tmp_path / "k.cu").write_text(
        "// extern __shared__ in a comment is not code\n"
        "__global__ void __launch_bounds__(128) dyn(float* y) { extern __shared__ __align__(16) float s[]; "
        "if (y) { s[0] = 1; } }\n"
        "__global__ void plain(float* y) { y[0] = 1; }\n")
    assert source_scan.sync_text(tmp_path / "k.cu") == source_scan.SyncText(frozenset({"dyn"}), False)
    (tmp_path / "k.cu").write_text('#include "helper.cuh"\n' + (tmp_path / "k.cu").read_text())
    assert source_scan.sync_text(tmp_path / "k.cu") == source_scan.SyncText(frozenset({"dyn"}), True)
