"""examples/nvcc_variant: a dequant variant written as an engine writes kernels (standard headers, host code,
the engine's enum and by-value struct), declared in TOML with no Python. It lists on any host; where nvcc
is installed it compiles for sm_80 and sm_90 and its launch is checked against each cubin's parameter
table (tests/cases/test_gpu_nvcc_variant.py runs its parity on a GPU)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from strata_bench.toml_abi.variant import load_variant_files, parse_variant_file
from strata_bench.kernels import build, cubin, cubin_symbols
from strata_bench.kernels.sources import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "nvcc_variant"
NVCC_MISSING = shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists()
ENGINE_TYPES = {"q8_0": 8, "iq2_xxs": 16, "iq2_xs": 17, "iq3_xxs": 18, "iq1_s": 19, "iq4_nl": 20, "iq3_s": 21,
                "iq2_s": 22, "iq4_xs": 23, "iq1_m": 29, "q2_0": 100}




def test_the_example_parses_and_lists(families):
    (tv,) = parse_variant_file(EXAMPLE / "variants.toml", families)
    assert (tv.family, tv.name, tv.compiler, tv.flags) == ("dequant", "engine", "nvcc", ("-std=c++17", "-O3"))
    assert tv.args == ("struct eng_rows", "y") and [p.ctype.size for p in tv.launches[0].params] == [24, 8]
    result = CliRunner().invoke(_cli(), ["parity", "--variants", str(EXAMPLE / "variants.toml"), "--family",
                                         "dequant", "--list"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == len(families["dequant"].default_cases()) and all(
        ln.endswith("  variants=dequant,engine") for ln in lines)


def test_every_format_has_an_engine_instance(families):
    load_variant_files((str(EXAMPLE / "variants.toml"),), families)
    dequant = families["dequant"]
    unit = str(EXAMPLE / "engine_dequant.cu")
    assert dequant.name_expressions(unit) == [f"eng::dequantize_rows<(eng::type){ENGINE_TYPES[f]}>"
                                              for f in ("iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s",
                                                        "iq1_m", "iq4_nl", "iq4_xs", "q8_0", "q2_0")]


@pytest.mark.skipif(NVCC_MISSING, reason="nvcc is not installed on this host: the example cannot compile here")
@pytest.mark.skipif(cubin_symbols.demangler() is None, reason="no c++filt to find kernels by name")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_example_compiles_and_its_abi_matches_the_cubin(families, cubin_cache, arch):
    load_variant_files((str(EXAMPLE / "variants.toml"),), families)
    dequant = families["dequant"]
    unit = str(EXAMPLE / "engine_dequant.cu")
    (exprs,) = build.programs(dequant, unit)
    compiled = build.compile_unit(dequant, unit, exprs, arch)  # raises on any argument mismatch
    image = cubin.read_elf(compiled.cubin)
    assert image.arch == int(arch[3:]) and compiled.options[0].endswith("nvcc")
    for expr in exprs:
        kernel = image.kernels[compiled.lowered[expr]]
        # eng::rows by value (pointer, long long, int, int: 24 bytes at 0), then float* y at 24
        assert [(p.offset, p.size) for p in kernel.params] == [(0, 24), (24, 8)], expr
    assert all(r.spill_stores == 0 for r in build.parse_resources(compiled.log, compiled.lowered))


def _cli():
    from strata_bench.cli.main import cli

    return cli
