"""The two bring-your-own-kernel examples: a new variant of a built-in family (dequant_rows) and a user's
own family (scale_rows). Both list and compile without a GPU and pass parity on one."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli
from strata_bench.gpu.devices import probe

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _args(example: str, family: str | None) -> list[str]:
    args = ["--kernels", str(EXAMPLES / example), "--cases", str(EXAMPLES / example / "cases.py")]
    return args + (["--family", family] if family else [])


EXAMPLE_FAMILIES = [("dequant_rows", "my_dequant", 11), ("scale_rows", "scale_rows", 3)]  # seeded cases


@pytest.mark.parametrize(("example", "family", "_seeded"), EXAMPLE_FAMILIES)
def test_example_lists_its_cases(example, family, _seeded, family_registry):
    result = CliRunner().invoke(cli, ["parity", *_args(example, family), "--list"])
    assert result.exit_code == 0, result.output
    names = result.stdout.split()  # the case names alone: the selection count goes to stderr
    assert names and all(n.startswith(f"{family}/") for n in names)


@pytest.mark.parametrize(("example", "family", "_seeded"), EXAMPLE_FAMILIES)
def test_example_lists_with_the_built_ins_as_the_readme_runs_it(example, family, _seeded):
    # The command of the brief, in a fresh process: no --family, so the built-ins' 482 cases come first.
    proc = subprocess.run([sys.executable, "-m", "strata_bench", "parity", *_args(example, None), "--list"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    names = proc.stdout.split()
    ours = [n for n in names if n.startswith(f"{family}/")]
    assert ours and len(names) == 482 + len(ours)


def test_example_variant_is_one_entry_of_dequants_table(family_registry):
    from strata_bench.cases import load_user_cases

    load_user_cases(str(EXAMPLES / "dequant_rows" / "cases.py"), str(EXAMPLES / "dequant_rows"))
    fam = family_registry["my_dequant"]
    assert fam.default_variants == ("dequant", "rows")
    assert fam.name_expressions("my_dequant.cu") == [f"my_dequant_rows<siq::fmt_{f}>" for f in
                                                     ("iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s",
                                                      "iq1_m", "iq4_nl", "iq4_xs", "q8_0", "q2_0")]
    assert fam.name_expressions("dequant/dequant.cu") == family_registry["dequant"].name_expressions("dequant/dequant.cu")


def test_scale_rows_reference_accepts_the_fp32_product_and_rejects_a_wrong_one(family_registry):
    from strata_bench.cases import load_user_cases

    load_user_cases(str(EXAMPLES / "scale_rows" / "cases.py"), str(EXAMPLES / "scale_rows"))
    fam = family_registry["scale_rows"]
    for case in fam.default_cases():
        host = fam.make_inputs(case)
        (exp,) = fam.reference(case, host)
        y32 = (host["s"][:, None] * host["x"]).astype(np.float64)  # what both kernels compute
        assert np.abs(y32 - exp.ref).max() <= exp.tol, case.name
        wrong = host["x"].astype(np.float64)  # forgetting the scale
        assert np.abs(wrong - exp.ref).max() > exp.tol, case.name


@pytest.mark.parametrize(("example", "family", "_seeded"), EXAMPLE_FAMILIES)
def test_example_compiles_for_sm90(example, family, _seeded, nvrtc, tmp_path, monkeypatch, family_registry):
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path))
    result = CliRunner().invoke(cli, ["compile", "--arch", "90", *_args(example, family)])
    assert result.exit_code == 0, result.output
    assert f"{next((EXAMPLES / example).glob('*.cu')).name}" in result.output


@pytest.mark.gpu
@pytest.mark.skipif(not probe().usable, reason=f"needs a usable CUDA GPU ({probe().reason})")
@pytest.mark.parametrize(("example", "family", "seeded"), EXAMPLE_FAMILIES)
def test_example_variant_passes_parity(example, family, seeded, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "strata_bench", "parity", *_args(example, family),
                           "--results", str(tmp_path), "-q", "-k", "seed"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (summary,) = tmp_path.rglob("parity-*.json")
    body = json.loads(summary.read_text())
    assert body["failures"] == 0 and body["summary"]["cases"] == seeded
