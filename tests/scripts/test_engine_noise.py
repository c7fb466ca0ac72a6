"""scripts/engine_noise.py: llama-bench processes per condition, interleaved, and the spread table they give
(between processes, within one, the ramp of the first repetitions), read off the fake llama-bench."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("engine_noise", ROOT / "scripts" / "engine_noise.py")
engine_noise = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(engine_noise)
FAKE = ROOT / "tests" / "engine" / "llama-fake.py"


def _fake_bench(tmp_path: Path) -> str:
    path = tmp_path / "llama-bench"
    path.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} bench \"$@\"\n")
    path.chmod(0o755)
    return str(path)


def test_every_condition_runs_interleaved_and_the_table_reads_its_samples(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_NOISE_PCT", "0")  # every repetition the same: exact spreads of zero
    monkeypatch.setenv("FAKE_TG_SLOWER_PCT", "0")
    out = tmp_path / "noise.json"
    assert engine_noise.main([_fake_bench(tmp_path), "m.gguf", "--processes", "2", "--prompts", "512,4096",
                              "--conditions", "plain,warm", "--out", str(out)]) == 0
    runs = json.loads(out.read_text())
    assert [r["condition"] for r in runs] == ["plain", "warm", "plain", "warm"]
    assert list(runs[0]["samples_ts"]) == ["pp512", "pp4096", "tg128"]
    assert runs[0]["samples_ts"]["pp512"] == [20000.0] * 10
    assert capsys.readouterr().out.splitlines() == [
        "| condition | test | processes | mean t/s | between (cv of means) | within (mean cv) | first3 / last3 |",
        "|---|---|---|---|---|---|---|",
        "| plain | pp512 | 2 | 20000 | 0.00% | 0.00% | 1.000 |",
        "| plain | pp4096 | 2 | 20000 | 0.00% | 0.00% | 1.000 |",
        "| plain | tg128 | 2 | 400 | 0.00% | 0.00% | 1.000 |",
        "| warm | pp512 | 2 | 20000 | 0.00% | 0.00% | 1.000 |",
        "| warm | pp4096 | 2 | 20000 | 0.00% | 0.00% | 1.000 |",
        "| warm | tg128 | 2 | 400 | 0.00% | 0.00% | 1.000 |",
    ]


def test_the_spread_columns_follow_the_samples():
    runs = [{"condition": "plain", "samples_ts": {"pp512": [90.0, 90.0, 90.0, 110.0, 110.0, 110.0]}},
            {"condition": "plain", "samples_ts": {"pp512": [110.0] * 6}}]
    row = engine_noise.summary_rows(runs)[2]
    # means 100 and 110: cv 6.73%; within: 10.95% and 0; ramp (90/110 + 1) / 2
    assert row == "| plain | pp512 | 2 | 105 | 6.73% | 5.48% | 0.909 |"
