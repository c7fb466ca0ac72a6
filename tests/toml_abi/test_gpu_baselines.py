"""Every family's baseline re-declared in TOML (tests/data/toml/) compiles, and on the GPU passes parity on
every default case: bitwise equal to the built-in baseline it re-declares (pfgemm: the same max |err|
against float64), written over both poisons, within every float64 tolerance."""
from __future__ import annotations

import pytest

from strata_bench.kernels.sources import REPO_ROOT

TOML_DIR = REPO_ROOT / "tests" / "data" / "toml"
FAMILIES = ("dequant", "fp16deq", "grouped", "mmvq", "moe_combine", "pfgemm", "q2warp", "q8_1", "swiglu_q8")


@pytest.fixture
def with_toml(request, families):
    from strata_bench.toml_abi.variant import load_variant_files

    name = request.param
    load_variant_files((str(TOML_DIR / f"{name}.toml"),), families)  # the test's own catalog
    return families[name]


@pytest.mark.nvrtc
@pytest.mark.parametrize("with_toml", FAMILIES, indirect=True)
def test_toml_baseline_compiles_for_sm90(with_toml, cubin_cache):
    from strata_bench.kernels import build

    family = with_toml
    source = family.sources[-1]
    names = family.name_expressions(source)
    compiled = build.compile_source(source, names, "sm_90", family.source_options(source))
    assert sorted(compiled.lowered) == sorted(names)


@pytest.mark.gpu
@pytest.mark.parametrize("with_toml", FAMILIES, indirect=True)
def test_toml_baseline_passes_parity(with_toml):
    from strata_bench.checks.parity import CaseStatus, check_case
    from strata_bench.kernels.build import load_kernels

    family = with_toml
    variant = family.default_variants[-1]
    assert variant.startswith("toml_")
    kernels = load_kernels(family, 0)
    cases = list(family.default_cases())
    assert cases and all(c.variants[-1] == variant for c in cases)
    for case in cases:
        result = check_case(family, case, kernels, 0)
        assert result.status is CaseStatus.PASS, (case.name, [c.detail for c in result.checks if not c.ok])
