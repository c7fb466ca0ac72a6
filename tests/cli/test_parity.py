"""`parity --profile`: the seconds per phase are printed to stderr after the table (the loop is faked,
so no GPU is needed)."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from strata_bench.checks.outcome import CaseResult, Status
from strata_bench.cli.main import cli


def _fake_loop(monkeypatch, seen):
    from strata_bench.runner import devices, loop

    def run_on_devices(cases, devs, per_case, on_result, on_fault, progress=None):
        seen.append(per_case)
        for case in cases:
            if per_case.times is not None:
                per_case.times.seconds["references"] += 0.25
            on_result(CaseResult(case, devs[0], Status.PASS, (), 0.0))

    monkeypatch.setattr(devices, "select_devices", lambda spec: [0])
    monkeypatch.setattr(devices, "device_name", lambda d: "Fake GPU")
    monkeypatch.setattr("strata_bench.results.provenance.collect", lambda *a, **k: {"device": "fake"})
    monkeypatch.setattr(loop, "run_on_devices", run_on_devices)


def test_profile_prints_each_phase_on_stderr(monkeypatch, tmp_path):
    seen = []
    _fake_loop(monkeypatch, seen)
    args = ["parity", "--family", "q8_1", "-k", "1x2560/n1/seed:1$", "--results", str(tmp_path), "-q"]
    result = CliRunner().invoke(cli, args + ["--profile"])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    start = lines.index("parity profile (1 cases):")
    assert lines[start + 1:start + 6] == ["  inputs           0.00 s    0.0%", "  references       0.25 s  100.0%",
                                          "  launches         0.00 s    0.0%", "  comparisons      0.00 s    0.0%",
                                          "  phases           0.25 s"]
    assert lines[start + 6].startswith("  wall ")
    assert "parity profile" not in result.stdout
    plain = CliRunner().invoke(cli, args)
    assert plain.exit_code == 0 and "parity profile" not in plain.output
    assert seen[-1].times is None and seen[-1].shared_runs == {}


def _checks_by_case(results_dir):
    import json

    (records,) = list(results_dir.rglob("parity-*.jsonl"))
    return {r["case"]: (r["status"], r["checks"]) for r in map(json.loads, records.read_text().splitlines())}


@pytest.mark.gpu
def test_gpu_parity_records_are_the_same_without_cache_cold_and_warm(tmp_path, monkeypatch):
    """On the GPU: mmvq q8_0 and q2warp (related-case sharing, cached references) give the same status and
    every check's values with the reference cache off, cold and warm; --profile lists the four phases."""
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path / "cache"))
    runs = {}
    for label, switch in (("off", "off"), ("cold", "on"), ("warm", "on")):
        monkeypatch.setenv("STRATA_REF_CACHE", switch)
        out = tmp_path / label
        result = CliRunner().invoke(cli, ["parity", "--family", "mmvq,q2warp", "--format", "q8_0,q2_0",
                                          "--results", str(out), "-q", "--profile"])
        assert result.exit_code == 0, result.output
        assert all(f"  {p} " in result.stderr for p in ("inputs", "references", "launches", "comparisons"))
        runs[label] = _checks_by_case(out)
    assert list((tmp_path / "cache" / "references").rglob("*.npz"))
    assert runs["off"] == runs["cold"] == runs["warm"]
    assert len(runs["warm"]) > 40
