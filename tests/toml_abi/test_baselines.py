"""Every built-in family's baseline, re-declared in TOML through its launch ABI (tests/data/toml/), parses,
joins the family on every case, and launches exactly what the baseline launches: the same kernels, grid,
block, shared memory and arguments, recorded by scripts/launch_trace.py's numpy stand-in for cupy."""
from __future__ import annotations

import importlib.util
import re
import sys

import pytest
from click.testing import CliRunner

from strata_bench.families import load_builtin_families
from strata_bench.toml_abi.variant import load_variant_files, parse_variant_file
from strata_bench.kernels.sources import REPO_ROOT

TOML_DIR = REPO_ROOT / "tests" / "data" / "toml"
# family -> (variant name, launches of the re-declared baseline)
BASELINES = {"mmvq": ("toml_old", 1), "dequant": ("toml_dequant", 1), "q8_1": ("toml_q8_1", 1),
             "q2warp": ("toml_old", 1), "fp16deq": ("toml_old", 1), "pfgemm": ("toml_old", 1),
             "swiglu_q8": ("toml_old", 2), "moe_combine": ("toml_old", 2), "grouped": ("toml_old", 4)}



def test_every_builtin_family_has_an_abi_and_a_baseline_toml(families):
    assert sorted(BASELINES) == sorted(families)
    assert sorted(p.stem for p in TOML_DIR.glob("*.toml")) == sorted(BASELINES)
    for name, family in families.items():
        abi = family.launch_abi()
        assert abi is not None and abi.family == name
        assert abi.baseline == family.default_variants[0], name


@pytest.mark.parametrize("family", sorted(BASELINES))
def test_baseline_toml_parses_and_joins_every_case(families, family):
    variant, launches = BASELINES[family]
    (tv,) = parse_variant_file(TOML_DIR / f"{family}.toml", families)
    assert (tv.family, tv.name, len(tv.launches)) == (family, variant, launches)
    load_variant_files((str(TOML_DIR / f"{family}.toml"),), families)
    fam = families[family]
    assert fam.default_variants[-1] == variant
    assert all(c.variants[-1] == variant for c in fam.default_cases())
    names = fam.name_expressions(str(tv.source))
    assert names and len(names) == len(set(names))


@pytest.mark.parametrize("family", sorted(BASELINES))
def test_parity_list_shows_the_toml_variant_on_every_case(family, monkeypatch):
    from strata_bench.cli.main import cli

    monkeypatch.chdir(REPO_ROOT)
    fams = load_builtin_families()
    variant = BASELINES[family][0]
    expected = [f"{c.name}  variants={','.join((*c.variants, variant))}" for c in fams[family].default_cases()]
    res = CliRunner().invoke(cli, ["parity", "--list", "--variants", f"tests/data/toml/{family}.toml",
                                   "--family", family])
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == expected


# --- the launches, through the numpy stand-in ---------------------------------------------------------
@pytest.fixture
def trace(monkeypatch):
    spec = importlib.util.spec_from_file_location("launch_trace", REPO_ROOT / "scripts" / "launch_trace.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "cupy", module._fake_cupy())
    for name, mod in module._fake_cupy_backends().items():
        monkeypatch.setitem(sys.modules, name, mod)
    return module


def _launches(trace, capsys, family, case, variant, dev) -> list[str]:
    """The recorded launches of one variant, allocations renumbered by first use (outputs are new per call)."""
    label = [variant]
    outs = family.alloc_outputs(case, dev)
    capsys.readouterr()
    family.launch(case, variant, trace.FakeKernels(label), dev, outs)
    lines = capsys.readouterr().out.splitlines()
    seen: dict[str, str] = {}

    def renumber(m: re.Match) -> str:
        return "@" + seen.setdefault(m.group(1), f"b{len(seen)}")

    return [re.sub(r"@(a\d+)", renumber, line.split(" | ", 1)[1]) for line in lines]


def _sample_cases(family, abi):
    """The smallest default case of every placeholder set the default cases use."""
    picked: dict[tuple, object] = {}
    for case in sorted(family.default_cases(), key=lambda c: c.rows * c.cols * max(c.ncols, 1)):
        picked.setdefault(tuple(sorted(abi.placeholders(case).items())), case)
    return list(picked.values())


@pytest.mark.parametrize("family", sorted(BASELINES))
def test_toml_baseline_launches_equal_the_builtin_baseline(families, trace, capsys, family):
    load_variant_files((str(TOML_DIR / f"{family}.toml"),), families)
    fam, variant = families[family], BASELINES[family][0]
    abi = fam.launch_abi()
    cases = _sample_cases(fam, abi)
    assert cases
    for case in cases:
        dev = fam.to_device(case, fam.make_inputs(case))
        builtin = _launches(trace, capsys, fam, case, abi.baseline, dev)
        declared = _launches(trace, capsys, fam, case, variant, dev)
        assert builtin and declared == builtin, (case.name, builtin, declared)
