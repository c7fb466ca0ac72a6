"""The second real-weight GGUF (rows of SmolLM2's token embedding the committed fixtures do not hold)
reaches every family that takes Q8_0 through `parity --gguf`."""
from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from strata_bench.cli.main import cli

GGUF = Path(__file__).resolve().parents[1] / "data" / "gguf" / "smollm2-embd-rows.gguf"
FIXTURE = "fixture:gguf-064cffcd05ae-token_embd.weight-r0-128"  # the file's sha256 prefix, tensor, rows


def test_its_rows_become_the_q8_0_families_cases(tmp_path):
    result = CliRunner().invoke(cli, ["parity", "--list", "--gguf", str(GGUF), "--tensor", "token_embd",
                                      "--rows", "0:128"], env={"STRATA_CACHE_DIR": str(tmp_path)})
    assert result.exit_code == 0, result.output
    families = sorted({name.split("/")[0] for name in result.stdout.split()})
    assert families == ["dequant", "fp16deq", "mmvq", "q2warp"]
    assert all(name.endswith(FIXTURE) or f"/{FIXTURE}/" in name for name in result.stdout.split())
    assert len(result.stdout.split()) == 7
