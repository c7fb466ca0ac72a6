"""The TOML example variant (examples/toml_variant) on the GPU: it joins mmvq and passes every parity
check beside old and new (bitwise equal to old, column checks, float64 references), on seeded, edge and
real-weight cases, including --gguf rows of a GGUF file that is not the committed one."""
from __future__ import annotations

import pytest

from strata_bench.kernels.sources import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "toml_variant" / "variants.toml"


@pytest.fixture
def mmvq_with_row8(families):
    from strata_bench.toml_abi.variant import load_variant_files

    load_variant_files((str(EXAMPLE),), families)  # a run's own catalog: loaded with its source, kept there
    return families["mmvq"]


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["iq2_xxs", "iq3_s", "iq1_m", "iq4_xs", "q8_0", "q2_0"])
def test_row8_passes_parity(mmvq_with_row8, fmt):
    from strata_bench.checks.parity import CaseStatus, check_case
    from strata_bench.kernels.build import load_kernels

    mmvq = mmvq_with_row8
    cases = [c for c in mmvq.default_cases() if c.fmt == fmt and c.ncols in (1, 3, 8, 11)]
    assert cases and all(c.variants == ("old", "new", "row8") for c in cases)
    kernels = load_kernels(mmvq, 0)
    for case in cases:
        result = check_case(mmvq, case, kernels, 0)
        assert result.status is CaseStatus.PASS, (case.name, [c.detail for c in result.checks if not c.ok])


@pytest.mark.gpu
def test_row8_passes_parity_on_other_gguf_rows(mmvq_with_row8, tmp_path, monkeypatch):
    from strata_bench.cases import CaseFilter
    from strata_bench.cases.fixtures import fixture_request_cases
    from strata_bench.cases.request import CaseRequest
    from strata_bench.checks.parity import CaseStatus, check_case
    from strata_bench.kernels.build import load_kernels

    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path))
    request = CaseRequest(gguf=str(REPO_ROOT / "tests/data/gguf/other-rows.gguf"), tensor="ffn_")
    cases = fixture_request_cases(CaseFilter(("mmvq",)), request, {"mmvq": mmvq_with_row8}, lambda line: None)
    assert len(cases) == 20
    kernels = load_kernels(mmvq_with_row8, 0)
    for case in cases:
        result = check_case(mmvq_with_row8, case, kernels, 0)
        assert result.status is CaseStatus.PASS, (case.name, [c.detail for c in result.checks if not c.ok])


@pytest.mark.gpu
def test_other_gguf_rows_pass_every_family_that_takes_them(tmp_path, monkeypatch):
    from strata_bench.cases import CaseFilter
    from strata_bench.families import load_builtin_families
    from strata_bench.cases.fixtures import fixture_request_cases
    from strata_bench.cases.request import CaseRequest
    from strata_bench.checks.parity import CaseStatus, check_case
    from strata_bench.kernels.build import load_kernels

    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path))
    families = load_builtin_families()
    request = CaseRequest(gguf=str(REPO_ROOT / "tests/data/gguf/other-rows.gguf"), tensor=r"^blk\.")
    cases = fixture_request_cases(CaseFilter(), request, families, lambda line: None)
    assert {c.family for c in cases} == {"dequant", "fp16deq", "mmvq", "pfgemm", "q2warp"}
    for case in cases:
        family = families[case.family]
        result = check_case(family, case, load_kernels(family, 0), 0)
        assert result.status is CaseStatus.PASS, (case.name, [c.detail for c in result.checks if not c.ok])


@pytest.mark.gpu
def test_dequant_rows_toml_passes_parity(families):
    from strata_bench.toml_abi.variant import load_variant_files
    from strata_bench.checks.parity import CaseStatus, check_case
    from strata_bench.kernels import build

    load_variant_files((str(REPO_ROOT / "examples" / "dequant_rows" / "variants.toml"),), families)
    dequant = families["dequant"]
    kernels = build.load_kernels(dequant, 0)
    for case in dequant.default_cases():
        assert case.variants == ("dequant", "rows")
        result = check_case(dequant, case, kernels, 0)
        assert result.status is CaseStatus.PASS, (case.name, [c.detail for c in result.checks if not c.ok])
