"""A family that launches nothing and names elements 'row R, column C', and one small case of it: enough
for the checks and the diagnosis, which only read outputs; and a fresh reference cache."""
from __future__ import annotations

import pytest

from strata_bench.cases import Case, Family


class _ToyFamily(Family):
    # name left empty so it does not register in the global registry
    def default_cases(self): return []
    def name_expressions(self, source): return []
    def make_inputs(self, case): return {}
    def to_device(self, case, host): return {}
    def alloc_outputs(self, case, dev): return {}
    def launch(self, *a, **k): pass
    def reference(self, case, host): return []

    def describe_index(self, case, output, index):
        return f"row {index[-1]}, column {index[0]}"


@pytest.fixture
def toy_family():
    return _ToyFamily()


@pytest.fixture
def toy_case():
    return Case("toy", "q8_0", rows=8, cols=32, ncols=2)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh reference cache under tmp_path, switched on (the references folder it fills)."""
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("STRATA_REF_CACHE", raising=False)
    return tmp_path / "references"
