"""--ggml on a GPU with the real tree: llama.cpp's kernels pass parity beside the built-ins (mmvq judged by
ggml's arithmetic, the formats only ggml has against float64, dequant and q8_1 bitwise), an unchanged copy
given as --ggml-b passes bitwise, and a one-line change in a copy is caught with its first and worst element.
The tree: $STRATA_GGML_TREE, else the carried `.ggml/` of the checkout, else the pinned sdist's."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli
from strata_bench.kernels.sources import REPO_ROOT

pytestmark = pytest.mark.gpu
FORMATS = "iq2_xxs,iq1_s,q8_0,q4_k"
PLANTED = ("sumi = sumi * ls / 8;", "sumi = sumi * ls / 8 + 1;")  # iq2_xxs's dot (vecdotq.cuh)


@pytest.fixture(scope="module")
def tree(request) -> Path:
    named = os.environ.get("STRATA_GGML_TREE")
    if named:
        return Path(named)
    if (REPO_ROOT / ".ggml" / "ggml" / "src" / "ggml-cuda" / "mmvq.cu").is_file():
        return REPO_ROOT / ".ggml"
    return request.getfixturevalue("real_tree")


def _parity(tmp_path, *args):
    return CliRunner().invoke(cli, ["parity", "-q", "--results", str(tmp_path / "results"), *args])


def test_ggml_passes_beside_the_built_ins(tree, tmp_path):
    result = _parity(tmp_path, "--ggml", str(tree), "--family", "mmvq,q8_1", "--format", FORMATS)
    assert result.exit_code == 0, result.output


def test_an_unchanged_copy_passes_bitwise_and_a_one_line_change_is_caught(tree, tmp_path):
    same = Path(shutil.copytree(tree, tmp_path / "same"))
    planted = Path(shutil.copytree(tree, tmp_path / "planted"))
    dot = next(planted.rglob("vecdotq.cuh"))
    text = dot.read_text()
    assert text.count(PLANTED[0]) == 1
    dot.write_text(text.replace(*PLANTED))
    args = ["--family", "mmvq", "--format", "iq2_xxs,q4_k", "-k", "/n[18]/"]
    assert _parity(tmp_path, "--ggml", str(tree), "--ggml-b", str(same), *args).exit_code == 0
    caught = _parity(tmp_path, "--ggml", str(tree), "--ggml-b", str(planted), *args)
    assert caught.exit_code == 1, caught.output
    failed = [ln for ln in caught.output.splitlines() if ln.startswith("FAIL ")]
    assert failed and all("/iq2_xxs/" in ln and "ggml_b=" in ln and "worst at" in ln for ln in failed), failed
