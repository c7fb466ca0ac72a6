"""`strata-bench results verify|list`: stale hashes, recorded failures and missing records all fail."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli
from strata_bench.kernels.sources import kernels_src_hash
from strata_bench.results import verify as resultcheck
from strata_bench.results.store import ResultsWriter


def write_result(directory: Path, kind: str = "parity", src_hash: str | None = None, failures: int = 0,
                 stamp: str = "20260101T000000Z") -> Path:
    prov = {"kernels_src_hash": kernels_src_hash() if src_hash is None else src_hash,
            "devices": [{"name": "NVIDIA H200"}]}
    writer = ResultsWriter(directory, kind, prov, stamp=stamp)
    writer.append({"case": "a", "ok": True})
    writer.append({"case": "b", "ok": failures == 0})
    return writer.finish({"cases": 2}, failures)


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_current_results_verify_ok(tmp_path):
    write_result(tmp_path / "nvidia-h200")
    write_result(tmp_path / "nvidia-h200", kind="bench", stamp="20260101T000001Z")
    result = run("results", "verify", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "2 summaries: 2 current, 0 not current" in result.stdout
    assert "nvidia-h200/parity-20260101T000000Z.json" in result.stdout


def test_stale_hash_fails_and_names_the_file(tmp_path):
    write_result(tmp_path)
    stale = write_result(tmp_path, src_hash="0" * 64, stamp="20250101T000000Z")
    result = run("results", "verify", str(tmp_path))
    assert result.exit_code == 1
    assert "1 of 2 summaries not current" in result.stderr
    assert stale.name in result.stderr and "000000000000 != current" in result.stderr


def test_recorded_failures_fail(tmp_path):
    write_result(tmp_path, failures=3)
    result = run("results", "verify", str(tmp_path))
    assert result.exit_code == 1
    assert "3 failure(s) recorded" in result.stderr


def test_missing_records_file_fails(tmp_path):
    summary = write_result(tmp_path)
    summary.with_suffix(".jsonl").unlink()
    result = run("results", "verify", str(tmp_path))
    assert result.exit_code == 1
    assert "records file missing" in result.stderr


def test_a_json_that_is_not_a_summary_is_a_problem(tmp_path):
    write_result(tmp_path)
    (tmp_path / "notes.json").write_text(json.dumps({"hello": 1}))
    current, verdicts = resultcheck.verify(tmp_path)
    by_name = {v.info.name: v for v in verdicts}
    assert by_name["notes.json"].problems == ("is not a results summary (no schema key)",)
    assert by_name["parity-20260101T000000Z.json"].ok
    assert current == kernels_src_hash()


def test_verdict_json_lists_problems(tmp_path):
    write_result(tmp_path, src_hash="ab" * 32, failures=1)
    result = run("results", "verify", str(tmp_path), "--format", "json")
    assert result.exit_code == 1
    body = json.loads(result.stdout)
    (entry,) = body["summaries"]
    assert entry["hash_ok"] is False and entry["failures"] == 1 and entry["ok"] is False
    assert len(entry["problems"]) == 2


def test_hash_follows_the_sources(tmp_path, monkeypatch):
    """Editing one byte of one header makes every earlier result stale."""
    src = tmp_path / "kernels"
    src.mkdir()
    (src / "a.cuh").write_text("#define X 1\n")
    monkeypatch.setenv("STRATA_KERNELS_SRC", str(src))
    write_result(tmp_path / "results")
    assert run("results", "verify", str(tmp_path / "results")).exit_code == 0
    (src / "a.cuh").write_text("#define X 2\n")
    assert run("results", "verify", str(tmp_path / "results")).exit_code == 1


@pytest.mark.parametrize("make_dir", [False, True])
def test_missing_or_empty_directory_is_a_usage_error(tmp_path, make_dir):
    target = tmp_path / "nothing"
    if make_dir:
        target.mkdir()
    result = run("results", "verify", str(target))
    assert result.exit_code == 2
    assert str(target) in result.stderr


def test_list_shows_kind_device_records_and_hash_state(tmp_path):
    write_result(tmp_path, failures=1)
    write_result(tmp_path, kind="ab", src_hash="f" * 64, stamp="20260102T000000Z")
    result = run("results", "list", str(tmp_path))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "2 summaries" in out and "NVIDIA H200" in out
    assert "(current)" in out and "ffffffffffff (old)" in out


def test_results_help_has_examples():
    for sub in ("verify", "list"):
        result = run("results", sub, "--help")
        assert result.exit_code == 0 and "Example:" in result.stdout
