"""`strata-bench parity`: what it says about the cases it selected; and `--device all` on three fake
devices (no CUDA): every case on each device, counts per device in the summary, the table and the markdown,
a failure and a fault naming their device, and a kernel fault on device 1 that leaves devices 0 and 2 whole;
`--profile` prints the seconds per phase (loop faked), and on a GPU the records are the same with the
reference cache off, cold and warm."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from strata_bench.cases import Case
from strata_bench.checks.outcome import CaseResult, CheckResult, CaseStatus
from strata_bench.cli.main import cli
from strata_bench.gpu import loop
from strata_bench.runs import prepare as preparing

from tests.cli.fake_devices import fake_three_devices

NAMES = {0: "NVIDIA H200", 1: "NVIDIA H200", 2: "Tesla V100-SXM2-16GB"}
CASES = [Case("toy", "q8_0", rows=1, cols=32, data=f"seed:{i}") for i in range(3)]


class IllegalAddress(RuntimeError):
    """Stands in for cupy's CUDARuntimeError after an illegal address."""


def fake_check_case(family, case, kernels, device, *loop_state):
    """Device 1 faults on the second case; device 2 fails the third case's bitwise check."""
    if device == 1 and case is CASES[1]:
        raise IllegalAddress("cudaErrorIllegalAddress: an illegal memory access was encountered")
    ok = not (device == 2 and case is CASES[2])
    check = CheckResult("bitwise", "new", ok, "" if ok else "3 of 32 outputs differ; first at row 0")
    return CaseResult(case, device, CaseStatus.PASS if ok else CaseStatus.FAIL, (check,), 0.01)


@pytest.fixture
def three_devices(monkeypatch, family_registry):
    fake_three_devices(monkeypatch, family_registry, NAMES.__getitem__, CASES)
    monkeypatch.setattr("strata_bench.checks.parity.check_case", fake_check_case)
    # The families a run names are those whose source closures it records (results/closures.py).
    monkeypatch.setattr("strata_bench.results.provenance.collect",
                        lambda ids, families: {"devices": [{"index": i, "name": NAMES[i]} for i in ids],
                                               "families": sorted(families)})


def _run(tmp_path, *args):
    result = CliRunner().invoke(cli, ["parity", "--device", "all", "--results", str(tmp_path), "-q", *args])
    (records_file,) = tmp_path.rglob("parity-*.jsonl")
    (summary_file,) = tmp_path.rglob("parity-*.json")
    records = [json.loads(line) for line in records_file.read_text().splitlines()]
    return result, records, json.loads(summary_file.read_text())


def test_every_case_on_each_device_and_a_fault_on_device_1_leaves_0_and_2_whole(three_devices, tmp_path):
    result, records, summary = _run(tmp_path)
    assert result.exit_code == 1, result.output
    assert [(r["device"], r["case"], r["status"]) for r in records] == [
        (0, CASES[0].name, "PASS"), (0, CASES[1].name, "PASS"), (0, CASES[2].name, "PASS"),
        (1, CASES[0].name, "PASS"), (1, CASES[1].name, "FAULT"),
        (2, CASES[0].name, "PASS"), (2, CASES[1].name, "PASS"), (2, CASES[2].name, "FAIL")]
    assert summary["summary"]["per_device"] == [
        {"device": 0, "name": "NVIDIA H200", "cases": 3, "failures": 0, "faults": 0, "not_run": 0},
        {"device": 1, "name": "NVIDIA H200", "cases": 2, "failures": 1, "faults": 1, "not_run": 1},
        {"device": 2, "name": "Tesla V100-SXM2-16GB", "cases": 3, "failures": 1, "faults": 0, "not_run": 0}]
    assert summary["failures"] == 2 and summary["summary"]["devices"] == [0, 1, 2]
    assert summary["provenance"]["devices"] == [{"index": i, "name": NAMES[i]} for i in range(3)]
    assert summary["provenance"]["families"] == ["toy"]
    # The table run: each device's counts, each failure with its device, and the exit line names the fault's.
    lines = result.stdout.splitlines()
    assert lines[-4:-1] == ["device 0 (NVIDIA H200): 3 cases, 0 failures",
                            "device 1 (NVIDIA H200): 2 cases, 1 failure (1 fault), 1 not run",
                            "device 2 (Tesla V100-SXM2-16GB): 3 cases, 1 failure"]
    assert lines[-1].startswith("8 cases, 2 failures on 3 devices; results: ")
    assert ("FAULT toy/q8_0/1x32/n1/seed:1 on device 1: kernel fault in toy/q8_0/1x32/n1/seed:1 on device 1: "
            "cudaErrorIllegalAddress: an illegal memory access was encountered") in result.stdout
    assert "FAIL toy/q8_0/1x32/n1/seed:2 on device 2: 3 of 32 outputs differ; first at row 0" in result.stdout
    assert result.stderr.splitlines()[0] == "3 cases selected, 0 of them on real weights (0 fixtures)"
    assert result.stderr.splitlines()[-1].startswith("parity: kernel fault in toy/q8_0/1x32/n1/seed:1 on device 1; "
                                                     "2 of 8 cases failed")


def test_every_failure_prints_and_records_the_command_that_reruns_it_alone(three_devices, tmp_path):
    result, records, _ = _run(tmp_path)
    fail = "strata-bench parity --family toy --format q8_0 -k '^toy/q8_0/1x32/n1/seed:2$' --device 2"
    fault = "strata-bench parity --family toy --format q8_0 -k '^toy/q8_0/1x32/n1/seed:1$' --device 1"
    lines = result.stdout.splitlines()
    at = lines.index("FAIL toy/q8_0/1x32/n1/seed:2 on device 2: 3 of 32 outputs differ; first at row 0")
    assert lines[at + 1] == f"  rerun: {fail}"
    assert lines[lines.index(f"  rerun: {fault}") - 1].startswith("FAULT toy/q8_0/1x32/n1/seed:1 on device 1: ")
    assert [(r["device"], r.get("rerun")) for r in records if r["status"] != "PASS"] == [(1, fault), (2, fail)]
    assert all("rerun" not in r for r in records if r["status"] == "PASS")
    md, _, _ = _run(tmp_path / "md", "-o", "md")
    assert (f"- `toy/q8_0/1x32/n1/seed:2` on device 2: 3 of 32 outputs differ; first at row 0\n"
            f"  rerun: `{fail}`") in md.stdout


def _dumping_check_case(family, case, kernels, device, times=None, shared_runs=None, ahead=None, on_failure=None):
    """fake_check_case, handing a failed case's (made-up) arrays to on_failure as check_case does."""
    import numpy as np

    from strata_bench.cases import Expected
    from strata_bench.gpu.launch import VariantRun

    result = fake_check_case(family, case, kernels, device)
    if result.status is CaseStatus.FAIL and on_failure is not None:
        y = np.zeros(4, np.float32)
        on_failure(result, {"x": np.arange(4.0)}, {"new": VariantRun("new", {"y": y}, {"y": y == 1})},
                   (Expected("y", np.ones(4), 1e-6, "t"),))
    return result


def test_junit_has_a_test_case_per_case_variant_and_device_and_the_step_summary_the_table(three_devices, tmp_path,
                                                                                          monkeypatch):
    from junitparser import Error, Failure, JUnitXml

    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result, _, _ = _run(tmp_path / "results", "--junit", str(tmp_path / "parity.xml"))
    assert result.exit_code == 1
    suite = next(iter(JUnitXml.fromfile(str(tmp_path / "parity.xml"))))
    outcomes = [(c.classname, c.name, [type(r).__name__ for r in c.result]) for c in suite]
    old_new = [("old", []), ("new", [])]
    assert outcomes == [
        *((c.name, v, r) for c in CASES for v, r in old_new),  # device 0: every case passes
        *((CASES[0].name, f"{v} (device 1)", r) for v, r in old_new),
        (CASES[1].name, "old (device 1)", ["Error"]), (CASES[1].name, "new (device 1)", ["Error"]),  # its fault
        *((c.name, f"{v} (device 2)", r) for c in CASES[:2] for v, r in old_new),
        (CASES[2].name, "old (device 2)", []), (CASES[2].name, "new (device 2)", ["Failure"])]  # new's check failed
    (failure,) = [r for c in suite for r in c.result if isinstance(r, Failure)]
    errors = [r for c in suite for r in c.result if isinstance(r, Error)]
    assert failure.message == "3 of 32 outputs differ; first at row 0"
    assert len(errors) == 2 and all("illegal memory access" in e.message for e in errors)
    assert (suite.tests, suite.failures, suite.errors) == (16, 1, 2)
    text = summary.read_text()
    assert text.startswith("earlier step\n### strata-bench parity: 8 cases, 2 failures\n\n| ")


def test_an_unwritable_junit_file_is_refused_before_anything_runs(three_devices, tmp_path):
    result = CliRunner().invoke(cli, ["parity", "--results", str(tmp_path / "r"), "--junit",
                                      str(tmp_path / "missing" / "x.xml")])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"--junit '{tmp_path}/missing/x.xml': cannot be written: "
                                          f"{tmp_path}/missing does not exist"]
    assert not (tmp_path / "r").exists()


def test_dump_failures_writes_each_failing_case_and_says_where(three_devices, tmp_path, monkeypatch):
    monkeypatch.setattr("strata_bench.checks.parity.check_case", _dumping_check_case)
    folder = tmp_path / "fails"
    result, _, _ = _run(tmp_path / "results", "--dump-failures", str(folder))
    assert result.exit_code == 1
    assert sorted(p.name for p in folder.iterdir()) == ["toy_q8_0_1x32_n1_seed_2.json", "toy_q8_0_1x32_n1_seed_2.npz"]
    assert result.stdout.splitlines()[-1] == (
        f"failing cases dumped to {folder}: 1 .npz (inputs, outputs, references) with a .json each (the case, "
        "its failed checks, its rerun command); 1 faulted, not dumped (their outputs went with the CUDA context)")
    assert "--dump-failures DIR" in CliRunner().invoke(cli, ["parity", "--help"]).output


def test_dump_failures_writes_nothing_when_every_case_passes(three_devices, tmp_path, monkeypatch, family_registry):
    passing = [c for c in CASES if c is not CASES[2]]
    monkeypatch.setattr(preparing, "prepare", lambda spec: preparing.Prepared(spec, family_registry, list(passing)))
    folder = tmp_path / "fails"
    result = CliRunner().invoke(cli, ["parity", "--device", "0", "--results", str(tmp_path / "r"), "-q",
                                      "--dump-failures", str(folder)])
    assert result.exit_code == 0, result.output
    assert not folder.exists()
    assert result.stdout.splitlines()[-1] == f"--dump-failures: no case failed, nothing written to {folder}"


def test_markdown_gives_counts_per_device(three_devices, tmp_path):
    result, _, _ = _run(tmp_path, "-o", "md")
    assert result.exit_code == 1
    assert ("| device | name | cases | failures | faults | not run |\n|---|---|---|---|---|---|\n"
            "| 0 | NVIDIA H200 | 3 | 0 | 0 | 0 |\n| 1 | NVIDIA H200 | 2 | 1 | 1 | 1 |\n"
            "| 2 | Tesla V100-SXM2-16GB | 3 | 1 | 0 | 0 |\n") in result.stdout
    assert "| `toy/q8_0/1x32/n1/seed:2` | 2 | old vs new | BITWISE | - | FAIL |" in result.stdout
    assert "- `toy/q8_0/1x32/n1/seed:2` on device 2: 3 of 32 outputs differ; first at row 0" in result.stdout


def test_json_summary_has_the_counts_per_device(three_devices, tmp_path):
    result, _, _ = _run(tmp_path, "-o", "json")
    body = json.loads(result.stdout)
    assert [d["failures"] for d in body["summary"]["per_device"]] == [0, 1, 1]
    assert [c["device"] for c in body["cases"]] == [0, 0, 0, 1, 1, 2, 2, 2]

def test_list_prints_only_case_names_and_the_real_weight_count_goes_to_stderr():
    result = CliRunner().invoke(cli, ["parity", "--list"])
    assert result.exit_code == 0, result.output
    names = result.stdout.splitlines()
    assert len(names) == 482 and all(name.count("/") >= 4 for name in names)
    # 60 cases on the 10 shipped real-weight fixtures (dequant and mmvq of 11 formats, the rest fused families);
    # a lost fixtures folder or family changes both numbers.
    assert result.stderr.strip() == "482 cases selected, 60 of them on real weights (10 fixtures)"


def test_a_filter_changes_the_count():
    result = CliRunner().invoke(cli, ["parity", "--list", "--family", "dequant"])
    # one real-weight case per format; q2_0 re-quantizes the q8_0 rows, so 11 cases read 10 fixtures
    assert result.stderr.strip() == "33 cases selected, 11 of them on real weights (10 fixtures)"


# --- --profile (the loop faked) and the reference cache on the GPU -------------------------------------
def _fake_loop(monkeypatch, seen, compile_seconds=None):
    from strata_bench.gpu import devices

    def run_on_devices(cases, devs, catalog, per_case, on_result, on_fault, progress=None, compiled=None):
        seen.append(per_case)
        if compile_seconds is not None and compiled is not None:
            compiled(compile_seconds)
        for case in cases:
            if per_case.times is not None:
                per_case.times.seconds["references"] += 0.25
            on_result(CaseResult(case, devs[0], CaseStatus.PASS, (), 0.0))

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


def test_profile_prints_the_compile_before_the_loop(monkeypatch, tmp_path):
    _fake_loop(monkeypatch, [], compile_seconds=8.625)
    args = ["parity", "--family", "q8_1", "-k", "1x2560/n1/seed:1$", "--results", str(tmp_path), "-q", "--profile"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    start = lines.index("parity profile (1 cases):")
    assert lines[start + 5:start + 7] == ["  phases           0.25 s",
                                          "  compile          8.62 s  (before the loop, not in the sum)"]
    assert lines[start + 7].startswith("  wall ")


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
    assert list((tmp_path / "cache" / "references").rglob("*.ref"))
    assert runs["off"] == runs["cold"] == runs["warm"]
    assert len(runs["warm"]) > 40
