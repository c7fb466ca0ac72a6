"""The README's bring-your-own-kernel example: it compiles without a GPU and passes parity on one."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli
from strata_bench.runner.devices import probe

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "dequant_rows"
ARGS = ["--kernels", str(EXAMPLE), "--cases", str(EXAMPLE / "cases.py"), "--family", "my_dequant"]


def test_example_lists_cases_with_both_variants():
    result = CliRunner().invoke(cli, ["parity", *ARGS, "--list"])
    assert result.exit_code == 0, result.output
    names = result.output.split()
    assert names and all(n.startswith("my_dequant/") for n in names)


def test_example_compiles_for_sm90(nvrtc, tmp_path, monkeypatch):
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path))
    result = CliRunner().invoke(cli, ["compile", "--arch", "90", *ARGS])
    assert result.exit_code == 0, result.output
    assert "my_dequant.cu" in result.output


@pytest.mark.gpu
@pytest.mark.skipif(not probe().usable, reason=f"needs a usable CUDA GPU ({probe().reason})")
def test_example_variant_passes_parity(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "strata_bench", "parity", *ARGS, "--results", str(tmp_path),
                           "-q", "-k", "seed"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (summary,) = tmp_path.rglob("parity-*.json")
    body = json.loads(summary.read_text())
    assert body["failures"] == 0 and body["summary"]["cases"] == 11
