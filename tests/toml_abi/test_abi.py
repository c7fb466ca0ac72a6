"""Launch ABIs (toml_abi/abi.py): the markdown table docs/ABI.md holds (tests/test_abi_doc.py compares them),
and every built-in ABI is complete: each case's fields are the named ones, its placeholders a compiled set."""
from __future__ import annotations

import pytest

from strata_bench.families import load_builtin_families
from strata_bench.toml_abi.abi import AbiArg, LaunchAbi, abi_table

FAMILIES = load_builtin_families()


def test_abi_table_format():
    abi = LaunchAbi("f", (AbiArg("w", "const uint8_t*", "rows at `stride`", lambda c, d, o: None),), ("rows",),
                    lambda c: {"rows": 1}, ({},), lambda c: {})
    assert abi_table(abi) == "| name | C type | layout |\n|---|---|---|\n| `w` | `const uint8_t*` | rows at `stride` |"


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_case_has_fields_and_a_compiled_placeholder_set(name):
    family = FAMILIES[name]
    abi = family.launch_abi()
    assert len(set(abi.arg_names)) == len(abi.arg_names) and all(a.layout and a.ctype for a in abi.args)
    for case in family.default_cases():
        assert sorted(abi.fields(case)) == sorted(abi.field_names), case.name
        assert dict(abi.placeholders(case)) in [dict(s) for s in abi.placeholder_sets], case.name
