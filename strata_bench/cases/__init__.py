"""Cases: one registry of kernel families and the cases they declare; parity, bench and ab all read it.

A case is a frozen dataclass whose fields are its name (case.py). A family (one module under
`strata_bench/families/`, or a user's `--cases FILE.py`) declares how to build a case's inputs, its
variants (a table of name, kernels and launch) and its float64 references (family.py); it registers
itself when its class is defined (registry.py); `strata_bench.families.load_builtin_families()` imports the
built-in ones.
"""
from strata_bench.cases.case import Case, CaseFilter, Expected, Output
from strata_bench.cases.family import Family, Variant
from strata_bench.cases.registry import FAMILIES, load_user_cases, register_family, select_cases

__all__ = ["Case", "CaseFilter", "Expected", "Output", "Family", "Variant", "FixtureRef", "fixture_ref", "FAMILIES",
           "load_user_cases", "register_family", "select_cases"]

# Fixtures bring numpy: imported when first asked for, so `strata-bench --help` and a usage error never load it.
_LAZY = {"FixtureRef": "strata_bench.cases.fixtures", "fixture_ref": "strata_bench.cases.fixtures"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
