"""`strata-bench results verify|list`: stale sources, recorded failures and missing records all fail; a
summary with recorded closures is stale only where its families' files changed."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from strata_bench.families import load_builtin_families
from strata_bench.cli.main import cli
from strata_bench.kernels.sources import kernels_dir, kernels_src_hash
from strata_bench.results import closures, verify as resultcheck
from strata_bench.results.store import ResultsWriter


def write_result(directory: Path, kind: str = "parity", src_hash: str | None = None, failures: int = 0,
                 stamp: str = "20260101T000000Z", families: tuple[str, ...] | None = None) -> Path:
    """A summary as a run writes it; `families` (built-in names) records their closures, as parity,
    bench and kernel A/B do; without it, an old-style summary with the kernels_src hash alone."""
    prov = {"kernels_src_hash": kernels_src_hash() if src_hash is None else src_hash,
            "devices": [{"name": "NVIDIA H200"}]}
    if families is not None:
        registry = load_builtin_families()
        prov["sources"] = closures.family_records({name: registry[name] for name in families})
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
    result = run("results", "verify", str(tmp_path), "-o", "json")
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


@pytest.fixture
def kernels_copy(tmp_path, monkeypatch):
    """A copy of kernels_src that the test may edit (STRATA_KERNELS_SRC)."""
    copy = tmp_path / "kernels_src"
    shutil.copytree(kernels_dir(), copy)
    monkeypatch.setenv("STRATA_KERNELS_SRC", str(copy))
    return copy


def append_comment(path: Path) -> None:
    path.write_text(path.read_text() + "// an edit\n")


def test_a_changed_family_is_named_with_its_files(tmp_path, kernels_copy):
    results = tmp_path / "results"
    bench = write_result(results, kind="bench", families=("mmvq",))
    write_result(results, families=("q2warp",))
    append_comment(kernels_copy / "mmvq" / "mmvq.cu")
    result = run("results", "verify", str(results))
    assert result.exit_code == 1
    assert result.stderr == (f"results verify: 1 of 2 summaries not current (first: {bench.name}: "
                             "mmvq: kernels_src/mmvq/mmvq.cu changed)\n")
    body = json.loads(run("results", "verify", str(results), "-o", "json").stdout)
    assert [(e["file"], e["judged_by"], e["stale_sources"], e["ok"]) for e in body["summaries"]] == [
        (bench.name, "sources", {"mmvq": ["kernels_src/mmvq/mmvq.cu changed"]}, False),
        ("parity-20260101T000000Z.json", "sources", {}, True)]


def test_a_shared_header_stales_every_family_that_reads_it(tmp_path, kernels_copy):
    write_result(tmp_path, families=("q8_1", "mmvq", "q2warp"))
    append_comment(kernels_copy / "formats" / "q8_1.cuh")
    (verdict,) = resultcheck.verify(tmp_path)[1]
    assert verdict.problems == ("mmvq: kernels_src/formats/q8_1.cuh changed",
                                "q2warp: kernels_src/formats/q8_1.cuh changed",
                                "q8_1: kernels_src/formats/q8_1.cuh changed")
    assert verdict.hash_ok is False


def test_an_edit_no_recorded_family_reads_leaves_the_result_current(tmp_path, kernels_copy):
    """A kernel file no built-in family compiles (as mmvq_mma_dec.cu was before it was deleted) and
    another family's kernel change: the closure summary stays current; an old-style summary is judged as
    before."""
    unread = kernels_copy / "mmvq" / "an_experiment.cu"
    unread.write_text("// read by no built-in family\n")
    closure_summary = write_result(tmp_path, families=("mmvq",))
    old_style = write_result(tmp_path, kind="bench")
    append_comment(unread)
    append_comment(kernels_copy / "q2warp" / "q2warp.cu")
    by_name = {v.info.name: v for v in resultcheck.verify(tmp_path)[1]}
    assert by_name[closure_summary.name].ok and by_name[closure_summary.name].hash_ok is True
    assert not by_name[old_style.name].ok
    assert by_name[old_style.name].problems[0].startswith("kernels_src ")


def test_list_shows_the_recorded_families(tmp_path, kernels_copy):
    write_result(tmp_path, families=("mmvq", "q2warp"))
    assert "mmvq, q2warp (current)" in run("results", "list", str(tmp_path)).stdout
    append_comment(kernels_copy / "q2warp" / "q2warp.cu")
    assert "mmvq, q2warp (changed: q2warp)" in run("results", "list", str(tmp_path)).stdout


def test_a_malformed_sources_record_is_a_problem(tmp_path):
    summary = write_result(tmp_path)
    body = json.loads(summary.read_text())
    body["provenance"]["sources"] = {"mmvq": {"files": {}}}
    summary.write_text(json.dumps(body))
    (verdict,) = resultcheck.verify(tmp_path)[1]
    assert verdict.problems == ("provenance sources: mmvq: not a closure record (files and units)",)
