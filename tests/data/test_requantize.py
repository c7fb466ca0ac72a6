"""requantize: llama.cpp's quantizer through ctypes reproduces the committed rows; missing pieces are
explained (exit 2). Tests that need libggml-python skip where the `[requantize]` extra is absent."""
from __future__ import annotations

import importlib.util

import gguf
import numpy as np
import pytest
from click.testing import CliRunner

from strata_bench.data import requantize
from strata_bench.cli.main import cli
from strata_bench.errors import InputError
from strata_bench.data.store import load_fixture
from strata_bench.formats import get_format
from strata_bench.kernels.sources import REPO_ROOT

COMMITTED = REPO_ROOT / "fixtures"
needs_libggml = pytest.mark.skipif(importlib.util.find_spec("libggml") is None,
                                   reason="libggml-python (the [requantize] extra) is not installed")


@pytest.fixture(scope="module")
def quantizer():
    return requantize.GgmlQuantizer()


@needs_libggml
@pytest.mark.parametrize("fmt", ["iq4_nl", "iq4_xs", "q4_k", "q6_k", "q8_0"])  # no slow grid set-up
def test_ggml_reproduces_the_committed_rows(quantizer, fmt):
    source = load_fixture("smollm2-ffn_down.q4_1", COMMITTED)
    committed = load_fixture(f"smollm2-ffn_down.{fmt}", COMMITTED)
    np.testing.assert_array_equal(quantizer.quantize(source.values(), get_format(fmt)), committed.raw)


@needs_libggml
def test_ggml_and_gguf_py_agree_on_q8_0(quantizer):
    values = np.random.default_rng(0).standard_normal((4, 256)).astype(np.float32)
    ours = quantizer.quantize(values, get_format("q8_0"))
    np.testing.assert_array_equal(ours, gguf.quants.quantize(values, gguf.GGMLQuantizationType.Q8_0))


@needs_libggml
def test_imatrix_requirement_is_read_from_ggml(quantizer):
    assert quantizer.requires_imatrix(get_format("iq2_xxs"))
    assert not quantizer.requires_imatrix(get_format("iq4_nl"))


def test_missing_library_is_explained(monkeypatch):
    monkeypatch.delenv("STRATA_LIBGGML_BASE", raising=False)
    monkeypatch.setattr(requantize.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(InputError, match=r"strata-bench\[requantize\]"):
        requantize.find_libggml_base()


def test_bad_source_is_refused_before_any_work(tmp_path):
    bogus = tmp_path / "model.gguf"
    bogus.write_text("not a model")
    result = CliRunner().invoke(cli, ["fixtures", "requantize", str(bogus), "--root", str(tmp_path / "out")])
    assert result.exit_code == 2 and "not a GGUF file" in result.output
    assert not (tmp_path / "out").exists()


def test_the_plan_covers_every_iquant_from_a_256_multiple_row():
    made = {item.fmt for item in requantize.PLAN if isinstance(item, requantize.Requantized)}
    assert {"iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_nl", "iq4_xs", "q8_0"} <= made
    assert {item.source for item in requantize.PLAN if isinstance(item, requantize.Requantized)} == {
        requantize.REQUANT_SOURCE}
