"""A run's own catalog of families: a copy of the built-in registry with the run's extensions applied
(a case file's families, TOML and foreign variants), so the global registry is the same after any run."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from strata_bench.cases.family import Family
    from strata_bench.cases.spec import RunSpec


def build_catalog(spec: "RunSpec") -> dict[str, "Family"]:
    """The built-in families (each its own copy), then every extension of `spec` attached in order."""
    from strata_bench.families import load_builtin_families

    catalog = {name: family.copy() for name, family in load_builtin_families().items()}
    for ext in sorted(spec.extensions, key=lambda e: e.order):
        ext.attach(catalog, spec)
    return catalog
