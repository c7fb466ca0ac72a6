"""Every registered family's default cases through parity on the GPU: one test, parametrized over the
registry (it replaces a copy of the same test in each family's test file).

Each case must pass every check; families whose variants record what they launched are checked against
that record too (EXTRA below), as their own copies of this test did."""
from __future__ import annotations

import pytest

from strata_bench.families import load_builtin_families

FAMILIES = load_builtin_families()
CASES = [pytest.param(name, case, id=case.name)
         for name, family in sorted(FAMILIES.items()) for case in family.default_cases()]


def _fp16deq_dispatch(family, case, result) -> None:
    """The old variant always ran the generic kernel; the new one the path its case names."""
    assert family.dispatch_log[(case.name, "old")] == "generic"
    assert family.dispatch_log[(case.name, "new")] == case.param("path")


def _pfgemm_equal_errors_and_dispatch(family, case, result) -> None:
    """Every variant has the same max |err| against float64, and auto ran the kernel the dispatcher names."""
    from strata_bench.families import pfgemm

    errs = {c.variant: c.max_err for c in result.checks if c.check == "f64"}
    assert len(set(errs.values())) == 1, errs
    assert family.ran[(case.name, "auto")] == pfgemm.kernel_expression(family.kernel_for(case, "auto"), case.fmt)


EXTRA = {"fp16deq": _fp16deq_dispatch, "pfgemm": _pfgemm_equal_errors_and_dispatch}


def test_every_built_in_family_has_default_cases():
    # Runs without a GPU: the parametrization below would silently shrink if a family listed none.
    assert len(CASES) >= 446
    assert {name for name, _ in (p.values for p in CASES)} == set(FAMILIES)


@pytest.mark.gpu
@pytest.mark.parametrize(("family_name", "case"), CASES)
def test_default_case_passes_parity_on_gpu(family_name, case):
    from strata_bench.checks.parity import CaseStatus, check_case
    from strata_bench.kernels.build import load_kernels

    family = FAMILIES[family_name]
    result = check_case(family, case, load_kernels(family, 0), 0)
    assert result.status is CaseStatus.PASS, [c.detail for c in result.checks if not c.ok]
    if family_name in EXTRA:
        EXTRA[family_name](family, case, result)
