"""Real weights as cases: a fixture (made with `fixtures make`/`from-gguf`, shipped, or read from a GGUF
file by --gguf) becomes each family's cases through one hook, `Family.fixture_cases`.

A fixture gives the rows and the inputs per row; the family gives what else a case needs (columns,
entries, tokens: --cols or its defaults). The built-in families' real-weight default cases go through
the same hook, so a fixture named on the command line is checked exactly like a shipped one.
"""
from __future__ import annotations

import fnmatch
import sys
from typing import TYPE_CHECKING, Any, Callable, Mapping

from strata_bench.cases.case import Case, CaseFilter
from strata_bench.data.fixture import FixtureRef, ref_from_entry  # FixtureRef: part of the kit
from strata_bench.errors import InputError

if TYPE_CHECKING:
    from strata_bench.cases.family import Family
    from strata_bench.cases.request import CaseRequest


def fixture_ref(name: str) -> FixtureRef | None:
    """The fixture `name` of the fixtures folders (the user's over the built-in set), None if absent."""
    from strata_bench.data.store import read_manifest

    entry = read_manifest()["fixtures"].get(name)
    return None if entry is None else ref_from_entry(name, entry)


def matching_fixtures(patterns: tuple[str, ...]) -> list[FixtureRef]:
    """Every fixture whose name matches one of the glob patterns (fnmatch, case-sensitive), sorted by
    name, each once; a pattern matching no fixture is an InputError naming it."""
    from strata_bench.data.store import read_manifest, search_roots

    entries = read_manifest()["fixtures"]
    chosen: dict[str, FixtureRef] = {}
    for pattern in patterns:
        names = [n for n in sorted(entries) if fnmatch.fnmatchcase(n, pattern)]
        if not names:
            where = " or ".join(str(r) for r in search_roots()) or "no fixtures folder"
            known = ", ".join(sorted(entries)[:8]) or "none"
            raise InputError(f"--fixtures {pattern!r} matches no fixture in {where} (known: {known}, ...)")
        chosen.update((n, ref_from_entry(n, entries[n])) for n in names)
    return [chosen[n] for n in sorted(chosen)]


def _selected_families(flt: CaseFilter, families: Mapping[str, "Family"]) -> list["Family"]:
    unknown = [f for f in flt.families if f not in families]
    if unknown:
        raise InputError(f"unknown family {unknown[0]!r}; families: {', '.join(sorted(families))}")
    return [fam for name, fam in families.items() if not flt.families or name in flt.families]


def fixture_request_cases(flt: CaseFilter, request: "CaseRequest", families: Mapping[str, "Family"],
                          note: Callable[[str], None] | None = None) -> list[Case]:
    """Every selected family's cases over every requested fixture (--fixtures globs, then the --gguf
    rows), filtered by --format and -k. A fixture no selected family takes is named in one line on
    `note` (stderr by default); none taken at all, or a filter leaving no case, is an InputError."""
    note = note or (lambda line: print(line, file=sys.stderr))
    refs = matching_fixtures(request.fixtures) if request.fixtures else []
    if request.gguf is not None:
        from strata_bench.data.gguf_cache import cached_gguf_fixtures

        refs += cached_gguf_fixtures(request.gguf, request.tensor or "", request.rows)
    chosen = _selected_families(flt, families)
    cases: list[Case] = []
    untaken = []
    for ref in dict.fromkeys(refs):
        own = [c for fam in chosen for c in fam.fixture_cases(ref, request.cols)]
        if not own:
            untaken.append(ref)
        cases += [c for c in own if flt.matches(c)]
    names = ", ".join(f.name for f in chosen)
    for ref in untaken:
        note(f"fixture {ref.name} ({ref.fmt}): no selected family takes {ref.fmt} (families: {names})")
    if not cases:
        raise InputError(f"no case over the {len(refs)} fixture(s) passes the filters (families: {names})")
    return list(dict.fromkeys(cases))


def fixture_sources(cases: list[Case]) -> list[dict[str, Any]]:
    """For a report: each fixture the cases use, once, with where its rows came from (file name,
    sha256 prefix, tensor, rows), in first-use order."""
    from strata_bench.data.source import parse_data

    out, seen = [], set()
    for case in cases:
        src = parse_data(case.data)
        if src.kind != "fixture" or src.fixture in seen:
            continue
        seen.add(src.fixture)
        out.append(describe_source(src.fixture))
    return out


def describe_source(name: str) -> dict[str, Any]:
    """{fixture, file, sha256, tensor, rows} of one fixture (what its provenance records; None where
    it records nothing, a seeded `fixtures make` fixture)."""
    from strata_bench.data.store import fixture_entry

    entry = fixture_entry(name)
    prov = (entry or {}).get("provenance") or {}
    rows = prov.get("rows")
    sha = prov.get("file_sha256")
    return {"fixture": name, "file": prov.get("file"), "sha256": sha[:12] if sha else None,
            "tensor": prov.get("tensor"), "rows": f"{rows[0]}:{rows[1]}" if rows else None,
            "kind": prov.get("kind")}
