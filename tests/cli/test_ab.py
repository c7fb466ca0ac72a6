"""`strata-bench ab` through click: modes, output formats, exit codes, and the kernel A/B hook."""
from __future__ import annotations

import json
import shlex
import sys
import types

import pytest
from click.testing import CliRunner

import strata_bench.ab
from strata_bench.cli.main import cli
from strata_bench.results.store import read_records

PY = sys.executable
METRIC = r"v=(?P<value>[0-9.]+)"
PRINT_V = "import os; print('v=' + os.environ.get('STRATA_TEST_V', '10'))"


@pytest.fixture(autouse=True)
def _fast_provenance(monkeypatch):
    # provenance.collect probes the GPU and packages; these tests check the A/B logic only.
    import strata_bench.cli.ab as ab_cmd

    monkeypatch.setattr(ab_cmd, "_provenance", lambda: {"devices": []})


def _run(args, tmp_path):
    return CliRunner().invoke(cli, ["ab", "--results", str(tmp_path), "-q", *args])


def test_env_switch_metric_json(tmp_path):
    res = _run(["--pairs", "3", "--warmup", "0", "--env-b", "STRATA_TEST_V=12", "--metric", METRIC,
                "-o", "json", "--", PY, "-c", PRINT_V], tmp_path)
    assert res.exit_code == 0, res.output
    case = json.loads(res.stdout)["cases"][0]
    assert case["verdict"] == "SLOWER"
    assert case["comparison"]["paired"]["mean_diff"] == 2.0
    assert case["arms"]["A"]["env"] == {} and case["arms"]["B"]["env"] == {"STRATA_TEST_V": "12"}


def test_higher_is_better_and_regression_exit(tmp_path):
    args = ["--pairs", "3", "--warmup", "0", "--env-b", "STRATA_TEST_V=8", "--metric", METRIC,
            "--higher-is-better", "--fail-on-regression", "5", "--", PY, "-c", PRINT_V]
    res = _run(args, tmp_path)
    assert res.exit_code == 1
    assert "regression" in res.output and "SLOWER" in res.output


def test_two_command_lines_table(tmp_path):
    a = f"{PY} -c 'import time; time.sleep(0.001)'"
    b = f"{PY} -c 'import time; time.sleep(0.002)'"
    res = _run(["--pairs", "2", "--warmup", "1", "--a", a, "--b", b], tmp_path)
    assert res.exit_code == 0, res.output
    assert "verdict" in res.stdout and "B - A (paired)" in res.stdout
    assert "2 warm-up runs discarded" in res.stdout
    records = read_records(next(tmp_path.rglob("ab-*.jsonl")))
    runs = [r for r in records if r["record"] == "run"]
    assert [(r["pair"], r["arm"]) for r in runs] == [(-1, "B"), (-1, "A"), (0, "A"), (0, "B"), (1, "B"), (1, "A")]
    assert runs[0]["argv"][-1] == "import time; time.sleep(0.002)"


def test_markdown_output(tmp_path):
    res = _run(["--pairs", "2", "--warmup", "0", "-o", "md", "--metric", METRIC, "--", PY, "-c", PRINT_V],
               tmp_path)
    assert res.exit_code == 0, res.output
    # The command heads the markdown (a command column wrapped over many lines at 80 columns: issue 27).
    assert res.stdout.startswith(f"**Commands**\n\n- A: `{shlex.join([PY, '-c', PRINT_V])}`\n")
    assert "| arm | runs | failed | n |" in res.stdout and "| **verdict** | SAME" in res.stdout
    assert "an A/A run" in res.stdout


@pytest.mark.parametrize("metric, label", [
    (r"prefill \d+ tokens in (?P<value>[0-9.]+) ms", "prefill ... tokens in ... ms"),  # its literal text, short
    (r"prefill:ms=prefill \d+ tokens in (?P<value>[0-9.]+) ms", "prefill"),  # its name
])
def test_one_metric_is_labelled_by_its_name_or_its_literal_text_never_its_whole_regex(tmp_path, metric, label):
    res = _run(["--pairs", "2", "--warmup", "0", "-o", "md", "--metric", metric, "--a",
                "echo prefill 512 tokens in 1.5 ms", "--b", "echo prefill 512 tokens in 1.5 ms"], tmp_path)
    assert res.exit_code == 0, res.output
    assert [line for line in res.stdout.splitlines() if line.startswith("| **metric**")] == [
        f"| **metric** | {label} (lower is better) |"]


def test_failing_command_too_many_failures_exit_1(tmp_path):
    res = _run(["--pairs", "4", "--warmup", "0", "--", PY, "-c", "import sys; print('nope'); sys.exit(2)"], tmp_path)
    assert res.exit_code == 1
    assert "too many failed runs" in res.output
    assert "exit code 2 | nope" in res.stdout  # each failure shown with its reason and last line
    runs = [r for r in read_records(next(tmp_path.rglob("ab-*.jsonl"))) if r["record"] == "run"]
    assert len(runs) == 3 and all(r["failure"] == "exit code 2" for r in runs)  # budget 25% of 8 = 2


def test_hanging_command_times_out_and_is_shown(tmp_path):
    hang = "import os, time; time.sleep(30 if os.environ.get('STRATA_TEST_HANG') else 0)"
    res = _run(["--pairs", "2", "--warmup", "0", "--timeout", "0.5", "--max-failures", "50%",
                "--env-b", "STRATA_TEST_HANG=1", "--", PY, "-c", hang], tmp_path)
    # Every B run timed out: within the failure budget, but there is nothing to compare (issue 27: exit 1).
    assert res.exit_code == 1, res.output
    assert res.output.strip().splitlines()[-1] == "an arm has no successful run: command: B: all 2 measured runs failed"
    assert res.stdout.count("timed out after 0.5 s") == 2
    assert "2 pairs excluded" in res.stdout


@pytest.mark.parametrize("args, message", [
    ([], "nothing to run"),
    (["--a", "true"], "nothing to run"),
    (["--a", "true", "--b", "true", "--", "true"], "either a command"),
    (["--metric", "v=(\\d+)\\.(\\d+)", "--", "true"], "(?P<value>"),
    (["--env-a", "1BAD=2", "--", "true"], "NAME=VALUE"),
    (["--max-failures", "many", "--", "true"], "max-failures"),
    (["--", "strata-no-such-program-xyz"], "command not found"),
    (["--unit", "tok/s", "--", "true"], "--unit converts wall time (s) into s, ms, us, ns; got 'tok/s'"),
    (["--family", "mmvq", "--a", "old", "--b", "new", "--env-a", "X=1"], "--env-a applies to command A/B"),
])
def test_usage_errors_exit_2(tmp_path, args, message):
    res = _run(args, tmp_path)
    assert res.exit_code == 2, res.output
    assert message in res.output


def test_kernel_ab_unavailable(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "strata_bench.ab.kernel", None)
    monkeypatch.delattr(strata_bench.ab, "kernel", raising=False)
    res = _run(["--family", "mmvq", "--a", "old", "--b", "new"], tmp_path)
    assert res.exit_code == 2 and "kernel A/B is unavailable" in res.output


def test_kernel_ab_hook_contract(tmp_path, monkeypatch):
    """A stand-in kernel_ab gets the filter, variants and plan, and its AbReport renders like a command A/B."""
    from strata_bench.ab.arms import Arm
    from strata_bench.ab.records import AbReport
    from strata_bench.ab.runner import run_ab

    seen = {}

    def run_kernel_ab(spec, variant_a, variant_b, plan, results_dir, progress):
        seen.update(families=spec.filter.families, formats=spec.filter.formats, a=variant_a, b=variant_b,
                    pairs=plan.pairs)
        values = iter([10.0, 11.0, 10.1, 11.1, 9.9, 10.9] * 2)
        arm = lambda label: Arm(label, lambda: next(values), {"variant": label})
        outcome = run_ab(arm(variant_a), arm(variant_b), plan, None, case="mmvq/iq2_xxs")
        return AbReport((outcome,), None, None)

    fake = types.ModuleType("strata_bench.ab.kernel")
    fake.run_kernel_ab = run_kernel_ab
    monkeypatch.setitem(sys.modules, "strata_bench.ab.kernel", fake)
    monkeypatch.setattr(strata_bench.ab, "kernel", fake, raising=False)
    res = _run(["--family", "mmvq", "--format", "iq2_xxs", "--a", "A", "--b", "B", "--pairs", "3",
                "--warmup", "0", "--order", "ab", "-o", "md"], tmp_path)
    assert res.exit_code == 0, res.output
    assert seen == {"families": ("mmvq",), "formats": ("iq2_xxs",), "a": "A", "b": "B", "pairs": 3}
    assert "A/B: `mmvq/iq2_xxs`" in res.stdout and "SLOWER" in res.stdout


def test_orders_agree_with_the_runner():
    from strata_bench.ab import plan
    from strata_bench.cli import ab

    assert ab.ORDERS == plan.ORDERS


@pytest.mark.parametrize("name", ["ab", "report", "compare", "plot"])
def test_help_has_an_example(name):
    res = CliRunner().invoke(cli, [name, "--help"])
    assert res.exit_code == 0 and "Example" in res.output


def test_ctrl_c_keeps_records_and_writes_a_partial_summary(tmp_path, monkeypatch):
    from strata_bench.ab import command
    from strata_bench.ab.arms import Sample

    calls = iter([0.1, 0.2, 0.1, KeyboardInterrupt()])

    def fake_run(spec):
        value = next(calls)
        if isinstance(value, BaseException):
            raise value
        return Sample(value, {"exit_code": 0})

    monkeypatch.setattr(command, "run_command", fake_run)
    res = _run(["--pairs", "5", "--warmup", "0", "--", "true"], tmp_path)
    assert res.exit_code == 130 and "interrupted" in res.output
    records = read_records(next(tmp_path.rglob("ab-*.jsonl")))
    assert [r["record"] for r in records] == ["plan", "run", "run", "run", "interrupted"]
    summary = json.loads(next(tmp_path.rglob("ab-*.json")).read_text())
    assert summary["summary"]["interrupted"] is True
    assert summary["summary"]["cases"][0]["comparison"]["paired"]["n"] == 1


def _no_gpu(monkeypatch):
    """A host where CuPy cannot be imported: the probe says so, and any `import cupy` fails."""
    from strata_bench.gpu import devices as gpu

    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.setattr(gpu, "probe", lambda: gpu.GpuProbe(False, 0, "cupy not importable (cupy)"))


def test_kernel_ab_without_cupy_exits_77(tmp_path, monkeypatch):
    _no_gpu(monkeypatch)
    res = _run(["--family", "mmvq", "--format", "iq2_xs", "-k", "4096x14336/n1/", "--a", "old", "--b", "new"],
               tmp_path)
    assert res.exit_code == 77, res.output
    assert "no usable CUDA GPU (cupy not importable (cupy))" in res.output
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_kernel_ab_unknown_variant_exits_2_before_the_device(tmp_path, monkeypatch):
    _no_gpu(monkeypatch)
    res = _run(["--family", "mmvq", "--format", "iq2_xs", "-k", "4096x14336/n1/", "--a", "new", "--b", "warp8"],
               tmp_path)
    assert res.exit_code == 2, res.output
    assert res.output.strip().splitlines()[-1] == \
        "variant 'warp8' is not one of mmvq/iq2_xs/4096x14336/n1/seed:1's: old, new"


def test_kernel_ab_help_example_names_a_real_variant():
    """The --variants example in `ab --help` names variants its TOML file declares."""
    import re

    from strata_bench.families import load_builtin_families
    from strata_bench.toml_abi.variant import parse_variant_file

    help_text = CliRunner().invoke(cli, ["ab", "--help"]).output
    m = re.search(r"--variants (\S+) --a (\S+) --b (\S+)", help_text)
    assert m, help_text
    # the built-ins loaded here: the global registry fills only where something imported them already
    declared = [v.name for v in parse_variant_file(m.group(1), load_builtin_families())]
    assert m.group(3) in declared and m.group(2) == "old"


# Usage errors of every stage: click's own, the command's option checks, the arms' checks before a run.
USAGE_ERRORS = [["--pairs", "0", "--", "true"], [], ["--metric", "v=(\\d+)(\\d+)", "--", "true"],
                ["--param", "x", "--", "true"], ["--max-failures", "many", "--", "true"],
                ["--", "strata-no-such-program-xyz"], ["--server", "x", "--", "true"]]


def test_a_usage_error_never_imports_scipy_stats(tmp_path):
    """scipy.stats costs 1-25 s to import on a loaded host: only a run that computes statistics loads it."""
    import subprocess
    from pathlib import Path

    script = ("import json, sys\nfrom click.testing import CliRunner\nfrom strata_bench.cli.main import cli\n"
              "codes = [CliRunner().invoke(cli, ['ab', '--results', sys.argv[1], *a]).exit_code "
              "for a in json.loads(sys.argv[2])]\n"
              "print(json.dumps([codes, sorted(m for m in ('scipy', 'scipy.stats') if m in sys.modules)]))\n")
    out = subprocess.run([PY, "-c", script, str(tmp_path / "res"), json.dumps(USAGE_ERRORS)], capture_output=True,
                         text=True, cwd=Path(__file__).resolve().parents[2], check=True).stdout
    assert json.loads(out) == [[2] * len(USAGE_ERRORS), []]
    assert not (tmp_path / "res").exists()


def test_command_ab_in_a_checkout_keeps_its_runs_out_of_the_tracked_results(tmp_path, monkeypatch):
    import subprocess

    repo = tmp_path / "checkout"
    (repo / "results").mkdir(parents=True)
    (repo / "results" / "kept.json").write_text("{}")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "results"], check=True)
    monkeypatch.chdir(repo)
    monkeypatch.delenv("STRATA_RESULTS_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    res = CliRunner().invoke(cli, ["ab", "-q", "--a", "true", "--b", "true", "--pairs", "2", "--warmup", "0"])
    assert res.exit_code == 0, res.output
    mine = tmp_path / "home" / ".cache" / "strata-bench" / "results"
    assert res.stderr.splitlines()[0] == (f"results/ here is tracked by git: this A/B's records go to {mine} "
                                          "(--results DIR to choose)")
    assert sorted(p.name for p in (repo / "results").iterdir()) == ["kept.json"]
    assert list(mine.rglob("ab-*.json"))


def test_command_ab_keeps_its_records_where_strata_results_dir_says(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STRATA_RESULTS_DIR", str(tmp_path / "mine"))
    res = CliRunner().invoke(cli, ["ab", "-q", "--a", "true", "--b", "true", "--pairs", "2", "--warmup", "0"])
    assert res.exit_code == 0 and "tracked by git" not in res.stderr
    assert list((tmp_path / "mine").rglob("ab-*.json")) and not (tmp_path / "results").exists()


def test_command_ab_outside_a_checkout_keeps_results_here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("STRATA_RESULTS_DIR", raising=False)
    res = CliRunner().invoke(cli, ["ab", "-q", "--a", "true", "--b", "true", "--pairs", "2", "--warmup", "0"])
    assert res.exit_code == 0, res.output
    assert list((tmp_path / "results").rglob("ab-*.json"))
