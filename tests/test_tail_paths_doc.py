"""docs/TAIL_PATHS.md stays true: a table for every built-in family, every case it names is one that
`strata-bench parity --list` prints (the default cases), and every place it names exists, with its condition
verbatim in the code. tail_rows() is also what tests/test_tail_mutations.py reads the cases of a tail from."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from click.testing import CliRunner

from strata_bench.families import load_builtin_families
from strata_bench.cli.main import cli
from strata_bench.kernels.sources import REPO_ROOT

DOC = REPO_ROOT / "docs" / "TAIL_PATHS.md"


@dataclass(frozen=True)
class TailRow:
    """One row of a family's table: the path, its file and function, its conditions, its cases (or why none)."""

    family: str
    path: str
    file: str
    function: str
    conditions: tuple[str, ...]
    cases: tuple[str, ...]
    unreachable: str


def _row(family: str, line: str) -> TailRow:
    cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
    assert len(cells) == 3, f"{family}: a row needs 3 cells (no ' | ' inside one): {line}"
    path, where, named = cells
    place, *conditions = re.findall(r"`([^`]+)`", where)
    file, _, function = place.partition(":")
    cases = tuple(re.findall(r"`([^`]+)`", named))
    unreachable = named if named.startswith("unreachable:") else ""
    return TailRow(family, path, file, function, tuple(conditions), cases, unreachable)


@functools.lru_cache(maxsize=1)
def tail_rows() -> tuple[TailRow, ...]:
    """Every table row of docs/TAIL_PATHS.md, under its family's heading, in the file's order."""
    rows, family = [], None
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            family = line[3:].strip()
        elif family and line.startswith("| ") and not line.startswith("| tail path "):
            rows.append(_row(family, line))
    return tuple(rows)


@functools.lru_cache(maxsize=1)
def listed_case_names() -> frozenset[str]:
    """The names `strata-bench parity --list` prints (every default case of the built-in families)."""
    result = CliRunner().invoke(cli, ["parity", "--list"])
    assert result.exit_code == 0, result.output
    return frozenset(result.stdout.split())


def test_every_built_in_family_has_a_table_of_tails():
    assert {r.family for r in tail_rows()} == set(load_builtin_families())


def test_every_named_case_is_a_default_case():
    for row in tail_rows():
        assert row.cases or row.unreachable, f"{row.family}: {row.path!r} names no case and no reason"
        missing = [name for name in row.cases if name not in listed_case_names()]
        assert not missing, f"{row.family}: {row.path!r} names cases parity --list lacks: {missing}"


def test_every_named_place_and_condition_is_in_the_code():
    for row in tail_rows():
        source = REPO_ROOT / row.file
        assert source.is_file(), f"{row.family}: no file {row.file}"
        text = source.read_text()
        assert re.search(rf"\b{re.escape(row.function)}\b", text), f"{row.file} has no {row.function}"
        assert row.conditions, f"{row.family}: {row.path!r} quotes no condition"
        for condition in row.conditions:
            assert condition in text, f"{row.file}: {condition!r} is not in the code"


def test_the_parser_reads_a_row_exactly():
    row = _row("q8_1", "| a tail | `kernels_src/q8_1/q8_1.cu:quantize_q8_1`, `if (x) return;`, `y` "
                       "| `q8_1/f32/3x32/n1/edge:4` (3 blocks), `q8_1/f32/1x2560/n1/seed:1` |")
    assert row == TailRow("q8_1", "a tail", "kernels_src/q8_1/q8_1.cu", "quantize_q8_1", ("if (x) return;", "y"),
                          ("q8_1/f32/3x32/n1/edge:4", "q8_1/f32/1x2560/n1/seed:1"), "")
    assert _row("grouped", "| t | `f.cu:g`, `c` | unreachable: no shape |").unreachable == "unreachable: no shape"
