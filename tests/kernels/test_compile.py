"""Every built-in family's sources compile for sm_90 through the project's NVRTC build, every named
instance is in the cubin, and no kernel spills or keeps a stack frame (a local-memory array would be a
performance bug on the hot path)."""
from __future__ import annotations

import pytest

from strata_bench.kernels.build import compile_source, parse_resources
from strata_bench.families import load_builtin_families

FAMILIES = load_builtin_families()
SOURCES = [(name, src) for name, fam in sorted(FAMILIES.items()) for src in fam.sources]
SLOW = {("mmvq", "mmvq/mmvq.cu")}  # about 40 s on 2 cores (every mmvq_old/mmvq_new instance in one program)


@pytest.mark.nvrtc
@pytest.mark.parametrize("family,source", [
    pytest.param(f, s, id=f"{f}:{s}", marks=[pytest.mark.slow] if (f, s) in SLOW else []) for f, s in SOURCES])
def test_source_compiles_for_sm90_without_spills(family, source, cubin_cache):
    fam = FAMILIES[family]
    comp = compile_source(source, fam.name_expressions(source), "sm_90")
    resources = {r.kernel: r for r in parse_resources(comp.log, comp.lowered)}
    assert set(fam.name_expressions(source)) <= set(resources)
    bad = [r for r in resources.values() if r.spill_stores or r.spill_loads or r.stack_bytes]
    assert not bad, bad
