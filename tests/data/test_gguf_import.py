"""GGUF import: rows of the committed GGUF file as fixtures, row ranges, re-quantization, bad files."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.data.gguf_import import fixture_from_gguf, parse_rows
from strata_bench.data.store import list_fixtures, load_fixture, sha256_file
from strata_bench.errors import InputError
from strata_bench.kernels.sources import REPO_ROOT

COMMITTED = REPO_ROOT / "fixtures"
ROWS_GGUF = COMMITTED / "smollm2-rows.gguf"


def test_from_gguf_reads_every_tensor_of_the_committed_file():
    fixtures = fixture_from_gguf(ROWS_GGUF, ".")
    assert len(fixtures) == len(list_fixtures(COMMITTED))
    sha = sha256_file(ROWS_GGUF)
    for fix in fixtures:
        committed = load_fixture(f"smollm2-{fix.provenance['tensor']}", COMMITTED)
        np.testing.assert_array_equal(fix.raw, committed.raw)
        assert fix.provenance == {"kind": "gguf", "file": "smollm2-rows.gguf", "file_sha256": sha,
                                  "tensor": fix.provenance["tensor"], "rows": [0, 64], "type": fix.fmt}
        values = fix.values()
        assert np.isfinite(values).all() and 0.005 < np.abs(values).mean() < 1  # real weights, not noise


def test_from_gguf_row_range_and_requantize():
    (fix,) = fixture_from_gguf(ROWS_GGUF, r"^ffn_down\.q4_1$", rows=(3, 7), as_fmt="q8_0")
    assert (fix.fmt, fix.rows, fix.cols, fix.name) == ("q8_0", 4, 1536, "smollm2-rows-ffn_down.q4_1-r3-7-as-q8_0")
    source = load_fixture("smollm2-ffn_down.q4_1", COMMITTED).values()[3:7]
    assert np.abs(fix.values() - source).max() <= np.abs(source).max() / 127  # one q8_0 step at most
    assert fix.provenance["requantized_as"] == "q8_0" and fix.provenance["rows"] == [3, 7]


@pytest.mark.parametrize("rows, match", [((5, 5), "empty row range 5:5"), ((6, 5), "reversed row range 6:5"),
                                         ((0, 65), "past the end")])
def test_from_gguf_bad_row_ranges(rows, match):
    with pytest.raises(InputError, match=match):
        fixture_from_gguf(ROWS_GGUF, "iq1_s", rows=rows)


def test_parse_rows():
    assert parse_rows("2:9") == (2, 9)
    for text in ("9", "a:b", "3:3", "4:1"):
        with pytest.raises(InputError):
            parse_rows(text)


def test_from_gguf_refuses_bad_files(tmp_path):
    not_gguf = tmp_path / "x.gguf"
    not_gguf.write_bytes(b"hello world")
    with pytest.raises(InputError, match="not a GGUF file"):
        fixture_from_gguf(not_gguf, ".")
    data = ROWS_GGUF.read_bytes()
    for size in (12, 2000, len(data) // 2, len(data) - 100):
        cut = tmp_path / f"cut{size}.gguf"
        cut.write_bytes(data[:size])
        with pytest.raises(InputError, match="truncated"):
            fixture_from_gguf(cut, ".")
    with pytest.raises(InputError, match="no tensor matches 'nope'"):
        fixture_from_gguf(ROWS_GGUF, "nope")
    with pytest.raises(InputError, match="no Python quantizer|gguf-py has no quantizer"):
        fixture_from_gguf(ROWS_GGUF, "q4_1", as_fmt="iq2_xxs")
