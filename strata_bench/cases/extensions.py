"""The run's extension that ships with the core, a user's case file (--cases, with --kernels), and where the
others are found: every package of strata_bench with an `extension.py` declaring EXTENSION (a class following
cases/spec.Extension) is one (TOML variants, toml_abi/; a foreign engine's kernels, ggml/), found by
`extension_types()` without this module naming any."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import click

from strata_bench.errors import InputError
from strata_bench.files import UserPath


@dataclass(frozen=True)
class CaseFile:
    """--cases FILE.py (and its --kernels DIR): families declared the way the built-ins are."""

    path: str
    kernels_dir: str | None = None

    options: ClassVar[tuple[Any, ...]] = (
        click.option("--cases", "cases_file", type=UserPath(dir_okay=False),
                     help="Python file declaring extra families/cases (same API as the built-ins)."),
        click.option("--kernels", "kernels_dir", type=UserPath(file_okay=False),
                     help="Directory of extra kernel sources the --cases file compiles."),
    )
    order: ClassVar[int] = 0
    adds_variants: ClassVar[bool] = False

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "CaseFile | None":
        path, kernels = params.get("cases_file"), params.get("kernels_dir")
        if kernels and not path:
            raise InputError(f"--kernels {kernels} needs --cases FILE.py naming the families that use it")
        return cls(path, kernels or None) if path else None

    def check(self, spec: Any) -> None:
        pass  # the file is read when attached: a missing one is named there

    def attach(self, catalog: dict, spec: Any) -> None:
        from strata_bench.cases.registry import load_user_cases

        load_user_cases(self.path, self.kernels_dir, into=catalog)

    def argv(self) -> list[str]:
        return ["--cases", self.path] + ([] if self.kernels_dir is None else ["--kernels", self.kernels_dir])

    def provenance(self) -> dict[str, Any]:
        return {"cases": self.path, "kernels": self.kernels_dir}


@functools.lru_cache(maxsize=None)
def extension_types() -> tuple[type, ...]:
    """Every extension class, in attach order: the core's, then each package's `extension.py` EXTENSION."""
    import importlib
    import pkgutil

    import strata_bench

    plugins = [importlib.import_module(f"strata_bench.{info.name}.extension").EXTENSION
               for info in pkgutil.iter_modules(strata_bench.__path__)
               if info.ispkg and _has_extension(info)]
    return tuple(sorted((CaseFile, *plugins), key=lambda t: t.order))


def _has_extension(info: Any) -> bool:
    from pathlib import Path

    return (Path(info.module_finder.path) / info.name / "extension.py").is_file()


def extensions_from(params: Mapping[str, Any]) -> tuple[Any, ...]:
    """The extensions a command line asked for, from the parsed values of every extension's options."""
    made = (t.from_params(params) for t in extension_types())
    return tuple(ext for ext in made if ext is not None)


def option_names(ext_type: type) -> tuple[str, ...]:
    """The parameter names an extension's options fill (what cli/options.py hands to from_params)."""
    def probe() -> None:
        pass

    for option in ext_type.options:
        probe = option(probe)
    return tuple(p.name for p in probe.__click_params__)
