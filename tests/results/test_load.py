"""Reading results files back: missing, mistyped and orphaned files are input errors."""
from __future__ import annotations

import pytest

from strata_bench.errors import InputError
from strata_bench.results.load import load



def test_bad_files_are_input_errors(tmp_path, records_file):
    with pytest.raises(InputError, match="not found"):
        load(tmp_path / "missing.json")
    bad = tmp_path / "x.txt"
    bad.write_text("hi")
    with pytest.raises(InputError, match=".json summary or a .jsonl"):
        load(bad)
    summary = records_file(tmp_path / "s", "bench", [{"case": "c"}])
    summary.with_suffix(".jsonl").unlink()
    with pytest.raises(InputError, match="records file .* is missing"):
        load(summary)
