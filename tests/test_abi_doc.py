"""docs/ABI.md documents every argument of every family's launch ABI as the code declares it (each section
holds exactly the table abi_table generates), and names every built-in family."""
from __future__ import annotations

from strata_bench.families import load_builtin_families
from strata_bench.toml_abi.abi import abi_table
from strata_bench.kernels.sources import REPO_ROOT


def test_abi_doc_matches_the_declared_abis():
    text = (REPO_ROOT / "docs" / "ABI.md").read_text()
    families = load_builtin_families()
    for name, family in families.items():
        abi = family.launch_abi()
        if abi is None:
            assert f"- {name} (baseline" in text, name
            continue
        section = text.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0]
        assert f"Baseline: `{abi.baseline}`" in section and abi.baseline == family.variants[0].name
        for arg in abi.args:
            assert f"| `{arg.name}` | `{arg.ctype}` | {arg.layout} |" in section, (name, arg.name)
        assert abi_table(abi) in section, name  # the whole table, in the ABI's order, nothing else
        assert "Case fields: " + ", ".join(f"`{f}`" for f in abi.field_names) + "." in section


def test_every_builtin_family_has_an_abi_section():
    text = (REPO_ROOT / "docs" / "ABI.md").read_text()
    assert "without a TOML ABI" not in text
    families = load_builtin_families()
    assert all(f.launch_abi() is not None for f in families.values())
    assert {line[3:] for line in text.splitlines() if line.startswith("## ") and " " not in line[3:]} == set(families)
