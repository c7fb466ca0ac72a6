"""`strata-bench parity --sanitize`: an unknown tool is one usage line (exit 2) before anything runs; a missing
compute-sanitizer or GPU is a skip with its reason (exit 77); with a stand-in sanitizer on PATH (no GPU),
one line per finding, a summary line per tool, the child's command line and the logs; on a GPU, the real
compute-sanitizer: no finding over dequant cases, and a planted read out of bounds in a user's kernel
found, naming its case and kernel (exit 1)."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli
from strata_bench.gpu import devices as gpu
from strata_bench.gpu import sanitize

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("spec,what", [("memchek", "unknown tool 'memchek'"),
                                       ("memcheck,racechek", "unknown tool 'racechek'")])
def test_an_unknown_tool_is_one_usage_line_before_anything_runs(cwd, spec, what, monkeypatch):
    monkeypatch.setattr("strata_bench.runs.prepare.prepare", lambda *a, **k: pytest.fail("cases selected"))
    result = CliRunner().invoke(cli, ["parity", "--sanitize", spec, "--family", "dequant"], prog_name="strata-bench")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"Error: Invalid value for '--sanitize': {what}; valid tools: memcheck, racecheck, initcheck, synccheck "
        "(see 'strata-bench parity --help')"]
    assert result.stdout == "" and list(cwd.iterdir()) == []


def test_a_missing_sanitizer_is_a_skip_naming_where_it_looked(cwd, monkeypatch):
    monkeypatch.setenv("PATH", str(cwd / "bin"))
    monkeypatch.setenv("CUDA_PATH", str(cwd / "cuda"))
    monkeypatch.setattr(sanitize, "CUDA_DEFAULT", cwd / "usr-local-cuda")
    monkeypatch.setattr(gpu, "select_devices", lambda spec: pytest.fail("looked for a GPU first"))
    result = CliRunner().invoke(cli, ["parity", "--sanitize", "memcheck", "--family", "dequant", "-k", "iq2_xs"])
    assert result.exit_code == 77, result.output
    assert result.stderr.splitlines() == [
        "3 cases selected, 1 of them on real weights (1 fixtures)",
        f"sanitize skipped: compute-sanitizer not found (looked in $PATH, $CUDA_PATH/bin ({cwd}/cuda/bin), "
        f"{cwd}/usr-local-cuda/bin)"]
    assert list(cwd.iterdir()) == []


def _stand_in(folder: Path, reports: dict[str, tuple[str, int]]) -> Path:
    """A `compute-sanitizer` on PATH that prints, per --tool, the given report and exits with the given code;
    it records its arguments and the child's marker variable in folder/argv-TOOL.txt."""
    (folder / "bin").mkdir(parents=True)
    for tool, (text, code) in reports.items():
        (folder / f"{tool}.txt").write_text(text)
        (folder / f"{tool}.rc").write_text(str(code))
    fake = folder / "bin" / "compute-sanitizer"
    fake.write_text(f"""#!{sys.executable}
import os, sys
from pathlib import Path
folder = Path({str(folder)!r})
tool = sys.argv[sys.argv.index("--tool") + 1]
(folder / f"argv-{{tool}}.txt").write_text(os.environ["STRATA_SANITIZE_CHILD"] + "\\n" + "\\n".join(sys.argv[1:]))
(folder / f"plan-{{tool}}.json").write_text(Path(os.environ["STRATA_SANITIZE_PLAN"]).read_text())
sys.stdout.write((folder / f"{{tool}}.txt").read_text())
sys.exit(int((folder / f"{{tool}}.rc").read_text()))
""")
    fake.chmod(0o755)
    return fake


CLEAN = """========= COMPUTE-SANITIZER
3 cases selected, 1 of them on real weights (1 fixtures)
strata-case: dequant/iq2_xs/1024x2560/n1/seed:1 @0
strata-case: dequant/iq2_xs/7x768/n1/edge:2 @0
strata-case: dequant/iq2_xs/64x1536/n1/fixture:smollm2-ffn_down.iq2_xs @0
strata-cases: done
3 cases, 0 failures on 1 device; results: /tmp/x/nvidia-h200/parity-20261201T230224Z.json
========= ERROR SUMMARY: 0 errors
"""

FOUND = """========= COMPUTE-SANITIZER
strata-case: dequant/iq2_xs/1024x2560/n1/seed:1 @0
========= Uninitialized __global__ memory read of size 4 bytes
=========     at void dequant_rows<siq::fmt_iq2_xs>(const void *, __half *, int, int)+0x1c0
=========     by thread (64,0,0) in block (2,0,0)
=========     Address 0x7f93fa802900
=========
strata-case: dequant/iq2_xs/7x768/n1/edge:2 @0
strata-case: dequant/iq2_xs/64x1536/n1/fixture:smollm2-ffn_down.iq2_xs @0
strata-cases: done
parity: 1 of 3 cases failed (details in /tmp/x/nvidia-h200/parity-20261201T230224Z.json)
========= ERROR SUMMARY: 1 error
"""


def _seconds_out(text: str) -> list[str]:
    """The lines of `text` with each run's seconds as 'S'."""
    return [re.sub(r"\((\d+\.\d) s\)", "(S s)", line) for line in text.splitlines()]


@pytest.fixture
def one_gpu(monkeypatch):
    monkeypatch.setattr(gpu, "select_devices", lambda spec: [0])
    monkeypatch.setattr(gpu, "device_name", lambda device: "NVIDIA H200")
    monkeypatch.setattr("strata_bench.kernels.build.device_arch", lambda device: "sm_90")  # the plan's compile


def test_findings_one_line_each_and_a_summary_per_tool(cwd, monkeypatch, one_gpu):
    _stand_in(cwd / "fake", {"memcheck": (CLEAN, 0), "initcheck": (FOUND, sanitize.ERROR_EXITCODE)})
    monkeypatch.setenv("PATH", f"{cwd / 'fake' / 'bin'}:{Path(sys.executable).parent}")
    result = CliRunner().invoke(cli, ["parity", "--sanitize", "memcheck,initcheck", "--family", "dequant",
                                      "--format", "iq2_xs", "-o", "md", "-k", "iq2", "--results", str(cwd / "res"), "-q"])
    assert result.exit_code == 1, result.output
    logs = cwd / "res" / "nvidia-h200"
    memcheck_log, = logs.glob("sanitize-memcheck-*.log")
    initcheck_log, = logs.glob("sanitize-initcheck-*.log")
    assert _seconds_out(result.stdout) == [
        f"memcheck: 3 cases, 0 findings (S s); log: {memcheck_log}",
        "initcheck: dequant/iq2_xs/1024x2560/n1/seed:1: dequant_rows<siq::fmt_iq2_xs>: "
        "Uninitialized __global__ memory read of size 4 bytes",
        f"initcheck: 3 cases, 1 finding (S s); log: {initcheck_log}",
    ]
    assert result.stderr.splitlines() == [
        "3 cases selected, 1 of them on real weights (1 fixtures)",
        f"sanitize: 1 finding under memcheck, initcheck (logs in {cwd / 'res' / 'nvidia-h200'})"]
    # The child: the same selection (the quant formats alone), quiet, its records in a scratch folder.
    marker, *argv = (cwd / "fake" / "argv-initcheck.txt").read_text().splitlines()
    assert marker == "initcheck"
    cut = argv.index(sys.executable)
    assert argv[:cut] == sanitize.sanitizer_command("cs", "initcheck", [])[1:]
    child = argv[cut:]
    assert child == [sys.executable, "-m", "strata_bench", "parity", "--family", "dequant", "--format", "iq2_xs",
                     "-k", "iq2", "-q"]  # --device 0 is the default: not repeated
    # Its plan: every case, each variant once (initcheck sees every launch).
    assert json.loads((cwd / "fake" / "plan-initcheck.json").read_text()) == {
        "dequant/iq2_xs/1024x2560/n1/seed:1": ["dequant"], "dequant/iq2_xs/7x768/n1/edge:2": ["dequant"],
        "dequant/iq2_xs/64x1536/n1/fixture:smollm2-ffn_down.iq2_xs": ["dequant"]}
    assert initcheck_log.read_text().splitlines()[1:] == FOUND.splitlines()


MIXED = """========= COMPUTE-SANITIZER
strata-case: moe_combine/f32/1x2048/n8/seed:1/lo=1 @0
strata-variant: old
strata-variant: new
========= Error: Race reported between Write access at moe_combine_norm_fused<8, 8, true>+0xa0
=========     and Read access at moe_combine_norm_fused<8, 8, true>+0xb0 [32 hazards]
=========
strata-case: moe_combine/f32/1x2048/n8/seed:1/lo=0 @0
strata-variant: old
strata-variant: new
strata-cases: done
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""


def test_racecheck_runs_what_it_can_see_beside_memcheck(cwd, monkeypatch, one_gpu):
    """racecheck skips the dequant case (no shared memory, no barrier) and names the variant of its finding;
    memcheck runs every case; each tool's lines come in the order given."""
    _stand_in(cwd / "fake", {"memcheck": (CLEAN, 0), "racecheck": (MIXED, sanitize.ERROR_EXITCODE)})
    monkeypatch.setenv("PATH", str(cwd / "fake" / "bin"))
    result = CliRunner().invoke(cli, ["parity", "--sanitize", "racecheck,memcheck", "--family", "dequant,moe_combine",
                                      "-k", "iq2_xs/7x768|moe_combine.*seed:1", "--results", str(cwd / "res"), "-q"])
    assert result.exit_code == 1, result.output
    logs = cwd / "res" / "nvidia-h200"
    race_log, = logs.glob("sanitize-racecheck-*.log")
    mem_log, = logs.glob("sanitize-memcheck-*.log")
    assert _seconds_out(result.stdout) == [
        "racecheck: moe_combine/f32/1x2048/n8/seed:1/lo=1 [new]: moe_combine_norm_fused<8, 8, true>: Error: Race "
        "reported between Write access at +0xa0 and Read access at +0xb0",
        "racecheck: 2 cases, 1 finding (S s), 1 skipped (no kernel of theirs uses shared memory or a barrier); "
        f"log: {race_log}",
        f"memcheck: 3 cases, 0 findings (S s); log: {mem_log}"]
    assert json.loads((cwd / "fake" / "plan-racecheck.json").read_text()) == {
        "moe_combine/f32/1x2048/n8/seed:1/lo=1": ["old", "new"], "moe_combine/f32/1x2048/n8/seed:1/lo=0": ["old", "new"]}
    assert json.loads((cwd / "fake" / "plan-memcheck.json").read_text()) == {
        "dequant/iq2_xs/7x768/n1/edge:2": ["dequant"], "moe_combine/f32/1x2048/n8/seed:1/lo=1": ["old", "new"],
        "moe_combine/f32/1x2048/n8/seed:1/lo=0": ["old", "new"]}


def test_a_tool_that_sees_no_case_is_not_started(cwd, monkeypatch, one_gpu):
    _stand_in(cwd / "fake", {"racecheck": (CLEAN, 0)})
    monkeypatch.setenv("PATH", str(cwd / "fake" / "bin"))
    result = CliRunner().invoke(cli, ["parity", "--sanitize", "racecheck", "--family", "dequant", "-k", "iq2_xs",
                                      "--results", str(cwd / "res")])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "racecheck: 0 cases, not run, 3 skipped (no kernel of theirs uses shared memory or a barrier)"]
    assert not (cwd / "fake" / "argv-racecheck.txt").exists() and not list((cwd / "res").rglob("*.log"))


def test_no_gpu_is_a_skip(cwd, monkeypatch):
    _stand_in(cwd / "fake", {})
    monkeypatch.setenv("PATH", str(cwd / "fake" / "bin"))
    monkeypatch.setattr(gpu, "probe", lambda: gpu.GpuProbe(False, 0, "no CUDA device"))
    result = CliRunner().invoke(cli, ["parity", "--sanitize", "memcheck", "--family", "dequant", "-k", "iq2_xs"])
    assert result.exit_code == 77, result.output
    assert result.stderr.splitlines()[-1] == ("sanitize skipped: no usable CUDA GPU (no CUDA device); 3 cases selected, "
                                              "none run")


# --- on a GPU, with the real compute-sanitizer ------------------------------------------------------------
def _needs_sanitizer():
    try:
        sanitize.find_sanitizer()
    except Exception as exc:  # noqa: BLE001 - ToolMissing: skip with its reason
        pytest.skip(str(exc))


@pytest.mark.gpu
def test_memcheck_finds_nothing_in_dequant_cases(cwd):
    _needs_sanitizer()
    result = CliRunner().invoke(cli, ["parity", "--sanitize", "memcheck", "--family", "dequant", "--format",
                                      "iq2_xs,q8_0", "-k", "/n1/(seed|edge)", "--results", str(cwd / "res"), "-q"])
    assert result.exit_code == 0, result.output
    assert [line.split(" (")[0] for line in result.stdout.splitlines()] == ["memcheck: 4 cases, 0 findings"]


@pytest.mark.gpu
def test_a_planted_read_out_of_bounds_is_found_naming_its_case_and_kernel(cwd):
    _needs_sanitizer()
    broken = cwd / "scale_rows"
    broken.mkdir()
    (broken / "cases.py").write_text((EXAMPLES / "scale_rows" / "cases.py").read_text())
    source = (EXAMPLES / "scale_rows" / "scale_rows.cu").read_text()
    # Far past x (256 MiB): inside no allocation of the process, whatever the allocator placed after x.
    planted = source.replace("float4 v = x[i];", "float4 v = x[i + (1 << 24)];  // planted: out of bounds")
    assert planted != source
    (broken / "scale_rows.cu").write_text(planted)
    result = CliRunner().invoke(cli, ["parity", "--sanitize", "memcheck", "--kernels", str(broken), "--cases",
                                      str(broken / "cases.py"), "--family", "scale_rows", "-k", "/1x64/",
                                      "--results", str(cwd / "res"), "-q"])
    assert result.exit_code == 1, result.output
    # One line per case, naming the variant that launched it, counting the reports of its launch (16 threads).
    lines = [re.sub(r" \((\d+) reports\)$", " (N reports)", line) for line in result.stdout.splitlines()]
    assert lines[:2] == [
        f"memcheck: scale_rows/f32/1x64/n1/{data} [vec4]: scale_rows_vec4: Invalid __global__ read of size 16 bytes "
        "(N reports)" for data in ("seed:1", "edge:2")], result.stdout
    assert lines[2].startswith("memcheck: 2 cases, 2 findings ("), result.stdout
    assert result.stderr.splitlines()[-1].startswith("sanitize: 2 findings under memcheck (logs in ")
