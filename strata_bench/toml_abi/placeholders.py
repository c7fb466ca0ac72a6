"""A variant's own name placeholders ([variant.placeholders]): a kernel template chosen per case by a
rule, as an engine names its instances (ggml's mul_mat_vec_q<type, ncols_dst, ...>):

    [variant.placeholders]
    type = { from = "fmt", map = { iq2_xxs = "GGML_TYPE_IQ2_XXS", q8_0 = "GGML_TYPE_Q8_0" } }
    ncols = { from = "ncols", values = [1, 2, 3, 4, 5, 6, 7, 8] }

`from` is one of the ABI's placeholders ({fmt}, {traits}, ...) or case fields (ncols, rows, ...); `map`
gives the text for each value, `values` lists the values taken as they are. The variant runs only the
cases every rule has a value for (a format the engine lacks, more columns than it instantiates), and
every combination is compiled or looked up in the cubin.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from strata_bench.toml_abi.abi import LaunchAbi
from strata_bench.errors import InputError


@dataclass(frozen=True)
class PlaceholderRule:
    """`name` takes the text `table` gives the case's value of `source`."""

    name: str
    source: str
    table: tuple[tuple[str, str], ...]

    def text(self, value: Any) -> str | None:
        return dict(self.table).get(str(value))


def parse_rules(value: Any, abi: LaunchAbi, where: str) -> tuple[PlaceholderRule, ...]:
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected a table of NAME = {{ from = ..., map = {{...}} }} or {{ from = ..., "
                         f"values = [...] }}, got {value!r}")
    return tuple(_rule(name, spec, abi, f"{where}.{name}") for name, spec in value.items())


def _rule(name: str, spec: Any, abi: LaunchAbi, where: str) -> PlaceholderRule:
    if not name.isidentifier() or name in abi.placeholder_names:
        raise InputError(f"{where}: {name!r} must be a new name (the ABI's placeholders: "
                         f"{', '.join(abi.placeholder_names) or 'none'})")
    if not isinstance(spec, dict) or "from" not in spec or sorted(set(spec) - {"from"}) not in (["map"], ["values"]):
        raise InputError(f"{where}: expected {{ from = ..., map = {{...}} }} or {{ from = ..., values = [...] }}")
    source = spec["from"]
    sources = (*abi.placeholder_names, *abi.field_names)
    if source not in sources:
        raise InputError(f"{where}.from: {source!r} is neither a placeholder nor a case field of the {abi.family} ABI "
                         f"({', '.join(sources)})")
    if "map" in spec:
        table = spec["map"]
        if not isinstance(table, dict) or not table or not all(isinstance(v, (str, int)) and not isinstance(v, bool)
                                                                 for v in table.values()):
            raise InputError(f"{where}.map: expected a table of value = \"text\", got {table!r}")
        pairs = tuple((str(k), str(v)) for k, v in table.items())
    else:
        values = spec["values"]
        if not isinstance(values, list) or not values or not all(isinstance(v, (str, int)) and not isinstance(v, bool)
                                                                  for v in values):
            raise InputError(f"{where}.values: expected a list of values, got {values!r}")
        pairs = tuple((str(v), str(v)) for v in values)
    return PlaceholderRule(name, source, pairs)


def name_sets(rules: tuple[PlaceholderRule, ...], abi: LaunchAbi) -> list[dict[str, str]]:
    """Every placeholder set a variant's kernels are compiled (or looked up) for: the ABI's sets that every
    rule over a placeholder has a text for, times each value of the rules over case fields."""
    out: list[dict[str, str]] = []
    for base in abi.placeholder_sets:
        partial = [dict(base)]
        for rule in rules:
            if rule.source in base:
                text = rule.text(base[rule.source])
                partial = [] if text is None else [{**p, rule.name: text} for p in partial]
            else:
                partial = [{**p, rule.name: text} for p in partial for _, text in rule.table]
        out += [p for p in partial if p not in out]
    return out


def names_for(rules: tuple[PlaceholderRule, ...], abi: LaunchAbi, case: Any) -> Mapping[str, str] | None:
    """The placeholder values of one case, None where a rule has none (the variant does not run it)."""
    names = dict(abi.placeholders(case))
    fields = abi.fields(case) if any(r.source not in names for r in rules) else {}
    for rule in rules:
        text = rule.text(names[rule.source] if rule.source in names else fields[rule.source])
        if text is None:
            return None
        names[rule.name] = text
    return names
