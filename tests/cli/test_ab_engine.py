"""`strata-bench ab` against the fake engine (tests/fake_engine.py): several metrics, identity, hooks,
a fresh server per run, parameters. Every run is a real process; timings are planted by FAKE_SLOWER_PCT."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli

PY = sys.executable
ENGINE = str(Path(__file__).resolve().parents[1] / "fake_engine.py")
PREFILL = r"prefill=prefill (?P<key>\d+) tokens in (?P<value>[0-9.]+) ms"
DECODE = r"decode:higher=([0-9.]+) tokens/s"
LOGITS = r"logits=logits sha256 (?P<key>\d+): (?P<value>\w+)"


@pytest.fixture(autouse=True)
def _fast_provenance(monkeypatch):
    import strata_bench.cli.ab as ab_cmd

    monkeypatch.setattr(ab_cmd, "_provenance", lambda: {"devices": []})


def _ab(tmp_path, *args):
    return CliRunner().invoke(cli, ["ab", "--results", str(tmp_path), "-q", "--warmup", "0", *args])


def _engine(*extra):
    return ["--", PY, ENGINE, "run", "--prompts", "128,512", *extra]


def test_several_metrics_one_verdict_each(tmp_path):
    res = _ab(tmp_path, "--pairs", "6", "--env-b", "FAKE_SLOWER_PCT=10", "--metric", PREFILL, "--metric", DECODE,
              "--format", "json", *_engine())
    assert res.exit_code == 0, res.output
    case = json.loads(res.stdout)["cases"][0]
    got = {m["name"]: (m["verdict"], m["higher_is_better"]) for m in case["metrics"]}
    assert got == {"prefill[128]": ("SLOWER", False), "prefill[512]": ("SLOWER", False), "decode": ("SLOWER", True)}
    ratios = {m["name"]: m["comparison"]["paired"]["ratio"] for m in case["metrics"]}
    assert ratios["prefill[512]"] == pytest.approx(1.10, abs=0.01)
    assert ratios["decode"] == pytest.approx(1 / 1.10, abs=0.01)
    runs = [json.loads(line) for line in next(tmp_path.rglob("ab-*.jsonl")).read_text().splitlines()]
    assert sorted(runs[1]["metrics"]) == ["decode", "prefill[128]", "prefill[512]"]


def test_markdown_has_a_row_per_metric_in_the_seed_shape(tmp_path):
    res = _ab(tmp_path, "--pairs", "4", "--env-b", "FAKE_SLOWER_PCT=10", "--metric", PREFILL, "--metric", DECODE,
              "--format", "md", *_engine())
    assert res.exit_code == 0, res.output
    assert "| metric | A runs | B runs | ratio B/A | B - A (paired) [95% CI] | dominance | verdict |" in res.stdout
    rows = [line for line in res.stdout.splitlines() if line.startswith(("| prefill", "| decode"))]
    assert len(rows) == 3
    assert rows[2].startswith("| decode (higher) | 4 | 4 | 0.90") and "every B below every A | SLOWER |" in rows[2]


def test_fail_on_regression_applies_to_each_metric(tmp_path):
    # Only the decode metric is judged against the threshold in a way that fails: B's tokens/s drop 10%.
    res = _ab(tmp_path, "--pairs", "4", "--env-b", "FAKE_SLOWER_PCT=10", "--metric", DECODE,
              "--metric", r"fast=prefill 128 tokens in ([0-9.]+) ms", "--fail-on-regression", "5", *_engine())
    assert res.exit_code == 1
    assert "decode: regression: B is worse by at least" in res.output
    assert "fast: regression" in res.output


def test_identity_table_same_and_exit_0(tmp_path):
    res = _ab(tmp_path, "--pairs", "2", "--metric", DECODE, "--same", LOGITS, "--format", "md", *_engine())
    assert res.exit_code == 0, res.output
    assert "| output | A | B | identical |" in res.stdout
    assert "| logits[128] | `2747b7c718564ba5` | `2747b7c718564ba5` | yes |" in res.stdout


def test_identity_mismatch_exits_1_naming_runs_and_values(tmp_path):
    res = _ab(tmp_path, "--pairs", "2", "--metric", DECODE, "--same", LOGITS, "--env-b", "FAKE_HASH=x",
              "--format", "json", *_engine())
    assert res.exit_code == 1
    case = json.loads(res.stdout)["cases"][0]
    row = case["identity"][0]
    assert row["name"] == "logits[128]" and row["same"] is False
    assert row["mismatch"] == "run 0 (A, pair 0) printed '2747b7c718564ba5', run 1 (B, pair 0) printed 'db95c71ee38000fc'"
    assert "output 'logits[128]' differs: run 0 (A, pair 0)" in res.output
