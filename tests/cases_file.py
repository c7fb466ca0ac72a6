"""Load a --cases file as strata-bench does, for tests: the families it registers go into a catalog of their
own (as a run's do), so that tests which walk every registered family see only the built-ins."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_cases_file(relpath: str) -> ModuleType:
    from strata_bench.cases.registry import registering_into
    from strata_bench.families import load_builtin_families

    # The built-ins first: a file that extends one (kit.builtin_family) reads them from the registry, as a
    # --cases file run by the runner does.
    load_builtin_families()
    spec = importlib.util.spec_from_file_location(f"cases_file_{Path(relpath).stem}", ROOT / relpath)
    module = importlib.util.module_from_spec(spec)
    with registering_into({}):
        spec.loader.exec_module(module)
    return module
