"""Built-in kernel families; each module registers its Family subclass on import."""
from __future__ import annotations

from typing import TYPE_CHECKING

from strata_bench.cases.registry import FAMILIES

if TYPE_CHECKING:
    from strata_bench.cases.family import Family


def load_builtin_families() -> dict[str, "Family"]:
    """Import the built-in family modules (each registers itself) and return the registry, the built-ins
    first in their modules' order (whichever module something imported first), then the rest as registered."""
    import importlib
    import pkgutil

    modules = [f"{__name__}.{info.name}" for info in pkgutil.iter_modules(__path__)
               if not info.name.startswith("_")]
    for module in modules:
        importlib.import_module(module)
    rank = {module: i for i, module in enumerate(modules)}
    ordered = sorted(FAMILIES.items(), key=lambda item: rank.get(type(item[1]).__module__, len(rank)))
    FAMILIES.clear()
    FAMILIES.update(ordered)
    return FAMILIES
