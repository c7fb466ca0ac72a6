"""Every kernel the project ships compiles for sm_90 under the loaded NVRTC: each built-in family's programs and
each experiment's (experiments/*/cases.py), as `strata-bench compile` plans them (build.programs), every name
expression lowered. One test, marked slow: its ~140 programs (~980 kernels) take about 4 minutes on 2 cores.

.ci/run runs this file twice: with the NVRTC that `.[dev]` installs (the newest 13.x), and in a second venv
pinned to `nvidia-cuda-nvrtc==13.0.*`, the lowest NVRTC the project supports and the H200's (13.0.88). The two
front ends disagree: 13.0 took a generic lambda nested in a kernel's lambda for a host function
(experiments/grouped_sched, now grouped's `new`: "host functions are not allowed in JIT mode") where 13.5
compiled it. A program that another family already plans (the same source, root and kernels) is compiled once.
A source that needs a toolkit header this host lacks (crt/mma.h) is skipped, as `compile` skips it; not every
one may be."""
from __future__ import annotations

import os

import pytest

from strata_bench.kernels import jobs

from tests.cases_file import ROOT

EXPERIMENTS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "experiments").glob("*/cases.py"))


def _families() -> list[tuple[str, dict]]:
    """(origin, {name: family}) for the built-ins, then for each experiment's cases file the families it adds."""
    import importlib.util

    from strata_bench.cases.registry import FAMILIES
    from strata_bench.families import load_builtin_families

    load_builtin_families()
    out = [("builtin", dict(FAMILIES))]
    for relpath in EXPERIMENTS:
        before = set(FAMILIES)
        spec = importlib.util.spec_from_file_location(f"compile_all_{relpath.split('/')[1]}", ROOT / relpath)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        added = {name: FAMILIES.pop(name) for name in sorted(set(FAMILIES) - before)}
        out.append((relpath, added))
    return out


def _jobs() -> list[jobs.CompileJob]:
    planned, seen = [], set()
    for _origin, families in _families():
        for job in jobs.plan(families, ["sm_90"]):
            key = (job.source, str(job.root), job.options, job.name_expressions)
            if key not in seen:
                seen.add(key)
                planned.append(job)
    return planned


JOBS = _jobs()


def test_the_plan_covers_every_kernel_of_every_experiment_and_built_in_family():
    """The sweep is not silently short: every experiment's cases file adds a family, and every name expression of
    every family's every source (built-in or experiment) is in a planned program of that source."""
    from strata_bench.kernels import build

    assert len(EXPERIMENTS) >= 6, EXPERIMENTS
    origins = _families()
    assert all(families for origin, families in origins if origin != "builtin"), [o for o, f in origins if not f]
    planned: dict[tuple, set[str]] = {}
    for job in JOBS:
        planned.setdefault((job.source, str(job.root), job.options), set()).update(job.name_expressions)
    count = 0
    for _origin, families in origins:
        for fam in families.values():
            for src in fam.sources:
                exprs = set(fam.name_expressions(src))
                count += len(exprs)
                key = (src, str(fam.kernels_root), build.family_source_options(fam, src))
                assert exprs <= planned.get(key, set()), (fam.name, src)
    assert count >= 400 and {"grouped", "fp16deq_tune", "mmvq_lanepair"} <= {j.family for j in JOBS}


@pytest.mark.nvrtc
def test_the_loaded_nvrtc_is_the_pinned_one():
    """.ci/run's NVRTC 13.0 run sets STRATA_EXPECT_NVRTC=13.0, so that a venv which resolved to another NVRTC
    (a newer wheel, a toolkit found first) fails instead of proving nothing."""
    from strata_bench.kernels import nvrtc

    want = os.environ.get("STRATA_EXPECT_NVRTC")
    if not want:
        pytest.skip("STRATA_EXPECT_NVRTC is not set (.ci/run sets it for its NVRTC 13.0 run)")
    assert "%d.%d" % nvrtc.version() == want


@pytest.mark.nvrtc
@pytest.mark.slow
def test_every_kernel_compiles_for_sm_90_under_the_loaded_nvrtc():
    """All programs in one test (about 4 minutes on 2 cores, NVRTC 13.0 or 13.5, into an empty cache), two at a
    time; every failure is reported with its NVRTC log, as `strata-bench compile` does."""
    use_cache = os.environ.get("STRATA_COMPILE_ALL_CACHE", "1") != "0"
    outcomes = jobs.run_all(JOBS, use_cache=use_cache, workers=2)
    failed = [f"{o.job.label}:\n{o.error}" for o in outcomes if o.error is not None]
    assert not failed, "\n\n".join(failed)
    missing = [o.job.label for o in outcomes
               if o.skipped is None and not {r.kernel for r in o.resources} >= set(o.job.name_expressions)]
    assert not missing, missing
    skipped = [f"{o.job.label}: {o.skipped}" for o in outcomes if o.skipped]
    assert len(skipped) < len(outcomes), skipped
