"""`strata-bench ab` against the fake engine (tests/fake_engine.py): several metrics, identity, hooks,
a fresh server per run, parameters. Every run is a real process; timings are planted by FAKE_SLOWER_PCT."""
from __future__ import annotations

import json
import re
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
              "-o", "json", *_engine())
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
              "-o", "md", *_engine())
    assert res.exit_code == 0, res.output
    # Every metric shows A's and B's own values (issue 27: they were shown for the first metric only).
    assert "| metric | A | B | B vs A [95% CI] | B - A (paired) | dominance | spread A / B | verdict |" in res.stdout
    rows = [line for line in res.stdout.splitlines() if line.startswith(("| prefill", "| decode"))]
    assert len(rows) == 3
    cells = [c.strip() for c in rows[2].strip("|").split("|")]
    assert cells[0] == "decode (higher)" and cells[5:] == ["every B below every A", cells[6], "SLOWER"]
    a_mean, a_low, a_high = (float(x) for x in re.fullmatch(r"(\S+) \((\S+) \.\. (\S+)\)", cells[1]).groups())
    assert a_low <= a_mean <= a_high and a_mean == pytest.approx(100, rel=0.01)  # mean (range) of 4 runs
    assert float(cells[2].split()[0]) == pytest.approx(100 / 1.1, rel=0.01)
    assert re.fullmatch(r"-[89]\.\d\d% \[-\d+\.\d\d%, -\d+\.\d\d%\]", cells[3]), cells[3]  # -9.09% planted
    assert re.fullmatch(r"\d\.\d\d% / \d\.\d\d%", cells[6]), cells[6]


def test_fail_on_regression_applies_to_each_metric(tmp_path):
    # Only the decode metric is judged against the threshold in a way that fails: B's tokens/s drop 10%.
    res = _ab(tmp_path, "--pairs", "4", "--env-b", "FAKE_SLOWER_PCT=10", "--metric", DECODE,
              "--metric", r"fast=prefill 128 tokens in ([0-9.]+) ms", "--fail-on-regression", "5", *_engine())
    assert res.exit_code == 1
    assert "decode: regression: B is worse by at least" in res.output
    assert "fast: regression" in res.output


def test_identity_table_same_and_exit_0(tmp_path):
    res = _ab(tmp_path, "--pairs", "2", "--metric", DECODE, "--same", LOGITS, "-o", "md", *_engine())
    assert res.exit_code == 0, res.output
    assert "| output | A | B | identical |" in res.stdout
    assert "| logits[128] | `2747b7c718564ba5` | `2747b7c718564ba5` | yes |" in res.stdout


def test_identity_mismatch_exits_1_naming_runs_and_values(tmp_path):
    res = _ab(tmp_path, "--pairs", "2", "--metric", DECODE, "--same", LOGITS, "--env-b", "FAKE_HASH=x",
              "-o", "json", *_engine())
    assert res.exit_code == 1
    case = json.loads(res.stdout)["cases"][0]
    row = case["identity"][0]
    assert row["name"] == "logits[128]" and row["same"] is False
    assert row["mismatch"] == "run 0 (A, pair 0) printed '2747b7c718564ba5', run 1 (B, pair 0) printed 'db95c71ee38000fc'"
    assert "output 'logits[128]' differs: run 0 (A, pair 0)" in res.output


def test_outputs_that_differ_in_bytes_that_are_not_utf8_are_not_identical(tmp_path):
    # Decoded with "replace", both read 'h=\ufffd': the table said "yes", exit 0.
    res = _ab(tmp_path, "--pairs", "1", "--same", "h=(.*)", "--a", r"printf 'h=\377'", "--b", r"printf 'h=\376'",
              "-o", "md")
    assert res.exit_code == 1, res.output
    assert ("| output | `\\xff` | `\\xfe` | NO: run 0 (A, pair 0) printed b'\\xff', run 1 (B, pair 0) printed "
            "b'\\xfe' |") in res.stdout
    assert res.output.strip().splitlines()[-1] == ("command: output 'output' differs: run 0 (A, pair 0) printed "
                                                   "b'\\xff', run 1 (B, pair 0) printed b'\\xfe'")
    runs = [json.loads(line) for line in next(tmp_path.rglob("ab-*.jsonl")).read_text().splitlines()][1:]
    assert [r["same"]["output"] for r in runs] == ["\udcff", "\udcfe"]  # the bytes, back exactly


def test_the_same_bytes_that_are_not_utf8_are_identical(tmp_path):
    res = _ab(tmp_path, "--pairs", "1", "--same", "h=(.*)", "--a", r"printf 'h=\377'", "--b", r"printf 'h=\377'",
              "-o", "md")
    assert res.exit_code == 0, res.output
    assert "| output | `\\xff` | `\\xff` | yes |" in res.stdout


def test_a_key_b_never_printed_is_missing_and_exits_1_unless_allowed(tmp_path):
    a, b = f"{PY} {ENGINE} run --prompts 128,512", f"{PY} {ENGINE} run --prompts 128"
    args = ["--pairs", "2", "--metric", DECODE, "--same", LOGITS, "--a", a, "--b", b, "-o", "md"]
    res = _ab(tmp_path, *args)
    assert res.exit_code == 1, res.output
    assert "| logits[512] | `94f8607915dff25f` | missing | MISSING: no run of B printed it |" in res.stdout
    assert res.output.strip().splitlines()[-1] == ("command: output 'logits[512]' is missing: no run of B printed it "
                                                   "(--allow-missing accepts that)")
    res = _ab(tmp_path, *args, "--allow-missing")
    assert res.exit_code == 0, res.output
    assert "- note: output 'logits[512]' is missing: no run of B printed it (allowed by --allow-missing)" in res.stdout


def test_a_whole_failed_arm_is_missing_and_exit_1_whatever_max_failures(tmp_path):
    res = _ab(tmp_path, "--pairs", "2", "--metric", DECODE, "--same", LOGITS, "--max-failures", "100%",
              "--a", f"{PY} {ENGINE} run", "--b", f"{PY} -c 'raise SystemExit(3)'", "-o", "md")
    assert res.exit_code == 1, res.output
    assert "| logits[128] | `2747b7c718564ba5` | missing | MISSING: B has no successful run |" in res.stdout
    assert "- note: nothing to compare: B: all 2 measured runs failed" in res.stdout
    assert res.output.strip().splitlines()[-1] == "an arm has no successful run: command: B: all 2 measured runs failed"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _left_alive(pids_file: Path) -> list[int]:
    import psutil

    pids = [int(p) for line in pids_file.read_text().split("\n") if line for p in line.split()]
    assert pids
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def test_hooks_run_once_and_per_run_in_the_arm_environment(tmp_path):
    log = tmp_path / "hooks.log"
    res = _ab(tmp_path, "--pairs", "2", "--metric", DECODE, "--env-b", "FAKE_SLOWER_PCT=3",
              "--setup", f"echo setup >> {log}", "--cleanup", f"echo cleanup >> {log}",
              "--prepare", f"echo prepare ${{FAKE_SLOWER_PCT:-0}} >> {log}", "--conclude", f"echo conclude >> {log}",
              *_engine())
    assert res.exit_code == 0, res.output
    assert log.read_text().split("\n") == ["setup", "prepare 0", "conclude", "prepare 3", "conclude",
                                           "prepare 3", "conclude", "prepare 0", "conclude", "cleanup", ""]


def test_failing_prepare_is_a_failed_run(tmp_path):
    res = _ab(tmp_path, "--pairs", "2", "--metric", DECODE, "--max-failures", "100%",
              "--prepare", "echo cannot prepare; exit 4", *_engine())
    assert res.exit_code == 1, res.output  # every run failed: no arm has anything to compare (issue 27)
    assert res.stdout.count("--prepare failed (exit code 4): echo cannot prepare; exit 4 | cannot prepare") == 4


def test_fresh_server_per_run_metrics_from_both_outputs_and_nothing_left(tmp_path, monkeypatch):
    port = _free_port()
    pids = tmp_path / "pids"
    monkeypatch.setenv("FAKE_PIDS_FILE", str(pids))
    res = _ab(tmp_path, "--pairs", "2", "--env-b", "FAKE_SLOWER_PCT=10", "--metric", PREFILL, "--metric", DECODE,
              "--server", f"{PY} {ENGINE} serve --port {port}", "--ready", "listening on port",
              "-o", "json", "--", PY, ENGINE, "client", "--port", str(port), "--prompts", "128,512")
    assert res.exit_code == 0, res.output
    case = json.loads(res.stdout)["cases"][0]
    assert {m["name"]: m["verdict"] for m in case["metrics"]} == {
        "decode": "SLOWER", "prefill[128]": "SLOWER", "prefill[512]": "SLOWER"}
    assert len(pids.read_text().splitlines()) == 4  # one server (and its worker) per run
    assert _left_alive(pids) == []


def test_server_ready_by_port(tmp_path):
    port = _free_port()
    res = _ab(tmp_path, "--pairs", "1", "--metric", DECODE, "--server", f"{PY} {ENGINE} serve --port {port}",
              "--ready-port", str(port), "--", PY, ENGINE, "client", "--port", str(port))
    assert res.exit_code == 0, res.output


def test_a_stale_server_on_the_ready_port_is_refused_before_anything_runs(tmp_path):
    import subprocess

    from strata_bench.ab.ports import describe

    port = _free_port()
    stale = subprocess.Popen([PY, ENGINE, "serve", "--port", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert stale.stdout.readline().startswith("listening")
        holder = describe(stale.pid)
        res = _ab(tmp_path / "res", "--pairs", "2", "--metric", DECODE, "--server",
                  f"{PY} {ENGINE} serve --port {port}", "--ready-port", str(port),
                  "--", PY, ENGINE, "client", "--port", str(port))
    finally:
        from strata_bench.ab.process import end_tree

        end_tree(stale.pid)  # the stale server and its worker: a kill of the server alone leaves the worker
        stale.wait()
    assert res.exit_code == 2
    assert res.output == f"--ready-port {port} is already in use by {holder}: stop it, or give the server another port\n"
    assert holder == f"pid {stale.pid} ({PY} {ENGINE} serve --port {port})"
    assert not (tmp_path / "res").exists()  # nothing written


def test_server_that_dies_or_is_never_ready_is_a_failed_run_with_its_last_lines(tmp_path, monkeypatch):
    port = _free_port()
    pids = tmp_path / "pids"
    monkeypatch.setenv("FAKE_PIDS_FILE", str(pids))
    common = ["--pairs", "2", "--metric", DECODE, "--max-failures", "100%", "--server",
              f"{PY} {ENGINE} serve --port {port}", "--ready", "listening on", "--ready-timeout", "1"]
    client = ["--", PY, ENGINE, "client", "--port", str(port)]
    res = _ab(tmp_path, *common, "--env-b", "FAKE_SERVER_DIE=1", *client)
    assert res.exit_code == 1, res.output  # B never ran: exit 1 whatever --max-failures allows (issue 27)
    assert "an arm has no successful run: command: B: all 2 measured runs failed" in res.output
    assert res.stdout.count("server exited with code 3 before it was ready | loading model... out of memory") == 2
    res = _ab(tmp_path, *common, "--env-b", "FAKE_READY_DELAY=30", *client)
    assert res.stdout.count("server not ready after 1 s (no line matched 'listening on')") == 2
    assert _left_alive(pids) == []


def test_server_options_are_checked(tmp_path):
    res = _ab(tmp_path, "--server", "x", "--", "true")
    assert res.exit_code == 2 and "--server needs exactly one of --ready REGEX and --ready-port N" in res.output
    res = _ab(tmp_path, "--ready-port", "9", "--", "true")
    assert res.exit_code == 2 and "--ready and --ready-port need --server CMD" in res.output


def test_parameter_matrix_cases_interleaved_and_one_column_group_per_value(tmp_path):
    res = _ab(tmp_path, "--pairs", "6", "--param", "pct=0,10", "--env-b", "FAKE_SLOWER_PCT={pct}",
              "--metric", DECODE, "-o", "md", "--", PY, ENGINE, "run", "--decode", "{pct}1")
    assert res.exit_code == 0, res.output
    # A row per metric and parameter value, with A's and B's own values (issue 27: only B/A was shown).
    assert "| metric | pct | A | B | B vs A [95% CI] | dominance | spread A / B | verdict |" in res.stdout
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in res.stdout.splitlines()
            if line.startswith("| decode (higher) |")]
    assert [(r[1], r[5], r[7]) for r in rows] == [("0", "overlap", "SAME"), ("10", "every B below every A", "SLOWER")]
    assert float(rows[1][2].split()[0]) == pytest.approx(100, rel=0.01)  # 100 tokens/s, each of 3 runs
    assert float(rows[1][3].split()[0]) == pytest.approx(100 / 1.1, rel=0.01)
    records = [json.loads(line) for line in next(tmp_path.rglob("ab-*.jsonl")).read_text().splitlines()]
    plans = [r for r in records if r["record"] == "plan"]
    assert [(p["case"], p["params"]) for p in plans] == [("command pct=0", [["pct", "0"]]),
                                                         ("command pct=10", [["pct", "10"]])]
    runs = [r for r in records if r["record"] == "run"]
    # Pair by pair, the combinations' order rotating: drift falls on both values alike.
    assert [(r["case"][-2:], r["pair"]) for r in runs][:8] == [
        ("=0", 0), ("=0", 0), ("10", 0), ("10", 0), ("10", 1), ("10", 1), ("=0", 1), ("=0", 1)]
    assert runs[0]["argv"][-1] == "01" and runs[2]["argv"][-1] == "101"  # {pct} in the command
    assert runs[2]["env"] == {} and runs[3]["env"] == {"FAKE_SLOWER_PCT": "10"}


def test_bad_params_exit_2(tmp_path):
    for args, message in ((["--param", "x"], "--param must be NAME=V1,V2"),
                          (["--param", "x=1,1"], "distinct"),
                          (["--param", "x=1", "--", "echo", "{y}"], "{y} is not a --param (known: x)")):
        res = _ab(tmp_path, *args, *(["--", "true"] if "--" not in args else []))
        assert res.exit_code == 2 and message in res.output, res.output


def test_report_renders_the_new_summary_from_its_records(tmp_path):
    res = _ab(tmp_path, "--pairs", "2", "--metric", PREFILL, "--metric", DECODE, "--same", LOGITS,
              "--param", "d=8,16", "-o", "md", "--", PY, ENGINE, "run", "--decode", "{d}")
    assert res.exit_code == 0, res.output
    summary = next(p for p in tmp_path.rglob("ab-*.json"))
    again = CliRunner().invoke(cli, ["report", str(summary), "-o", "md"])
    assert again.exit_code == 0, again.output
    for text in ("**A/B by parameter**", "| metric | d | A | B |", "| output | A | B | identical |",
                 "| logits[512] | `94f8607915dff25f` | `94f8607915dff25f` | yes |",
                 "| metric | A | B | B vs A [95% CI] |", "**A/B: `command d=16`**"):
        assert text in again.stdout, text


def test_ctrl_c_prints_both_paths(tmp_path, monkeypatch):
    from strata_bench.ab import command
    from strata_bench.ab.arms import Sample

    calls = iter([Sample(0.1), KeyboardInterrupt()])

    def fake_run(spec):
        value = next(calls)
        if isinstance(value, BaseException):
            raise value
        return value

    monkeypatch.setattr(command, "run_command", fake_run)
    res = _ab(tmp_path, "--pairs", "3", "--", "true")
    assert res.exit_code == 130
    records = next(tmp_path.rglob("ab-*.jsonl"))
    assert f"interrupted: records kept in {records}; summary (interrupted: true) in {records.with_suffix('.json')}" \
        in res.output
