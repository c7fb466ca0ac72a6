"""`--variants FILE.toml` as one extension of a run (cases/spec.Extension): kernel variants declared against a
family's launch ABI (docs/ABI.md) join that family's table in the run's own catalog."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import click

from strata_bench.files import UserPath


@dataclass(frozen=True)
class TomlVariants:
    """--variants FILE.toml (repeatable): kernel variants declared against a family's ABI (docs/ABI.md)."""

    paths: tuple[str, ...]

    options: ClassVar[tuple[Any, ...]] = (
        click.option("--variants", "variant_files", multiple=True, type=UserPath(dir_okay=False),
                     metavar="FILE.toml", help="Kernel variants declared in TOML against a family's ABI "
                                               "(docs/ABI.md); they join the family's variant table."),
    )
    order: ClassVar[int] = 10
    adds_variants: ClassVar[bool] = True

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "TomlVariants | None":
        paths = tuple(params.get("variant_files") or ())
        return cls(paths) if paths else None

    def check(self, spec: Any) -> None:
        pass  # parsed when attached, every file before any family changes

    def attach(self, catalog: dict, spec: Any) -> None:
        from strata_bench.toml_abi.variant import load_variant_files

        load_variant_files(self.paths, catalog)

    def argv(self) -> list[str]:
        return [w for path in self.paths for w in ("--variants", path)]

    def provenance(self) -> dict[str, Any]:
        return {"variants": list(self.paths)}


EXTENSION = TomlVariants
