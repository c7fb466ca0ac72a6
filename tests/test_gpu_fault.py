"""A kernel fault names its case, keeps the results so far, and exits 1 (GPU only)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from strata_bench.runner.devices import probe

DATA = Path(__file__).parent / "data" / "fault_family"

pytestmark = pytest.mark.gpu


@pytest.mark.skipif(not probe().usable, reason=f"needs a usable CUDA GPU ({probe().reason})")
def test_fault_is_named_and_earlier_results_are_kept(tmp_path):
    # A child process: the fault leaves its CUDA context unusable, and this test's process must go on.
    proc = subprocess.run(
        [sys.executable, "-m", "strata_bench", "parity", "--kernels", str(DATA), "--cases", str(DATA / "cases.py"),
         "--family", "fault_demo", "--results", str(tmp_path), "-q"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "fault_demo/f32/1x1024/n1/seed:1/fault=1" in proc.stdout + proc.stderr
    (records_file,) = tmp_path.rglob("parity-*.jsonl")
    records = [json.loads(line) for line in records_file.read_text().splitlines()]
    assert [r["status"] for r in records] == ["PASS", "FAULT"]
    (summary,) = tmp_path.rglob("parity-*.json")
    assert json.loads(summary.read_text())["failures"] == 1
