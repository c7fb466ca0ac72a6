"""compute-sanitizer's report read back: one finding per (tool, case, kernel, error), from report text in
the format compute-sanitizer 2025.3.1 prints on the H200 host (`--show-backtrace device`), interleaved with
the child's case markers; the tool names, the search for the sanitizer, its command line, and a run of a
stand-in sanitizer that prints a report."""
from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from strata_bench.errors import InputError, NoGpu, ToolMissing
from strata_bench.gpu import sanitize
from strata_bench.gpu.sanitize import Finding, kernel_name, parse_report

def _as_printed(text: str) -> str:
    """compute-sanitizer ends a record with its prefix and a space ('========= '), kept out of this file."""
    return text.replace("=========\n", "========= \n")


# Two reports of one read past the end in the first case, none in the second, a write inside a
# non-inlined device function in the third (its kernel is the device frame), then the summary.
MEMCHECK = _as_printed("""\
========= COMPUTE-SANITIZER
3 cases selected, 0 of them on real weights (0 fixtures)
strata-case: mmvq/iq2_xs/16x256/n1/seed:1 @0
========= Invalid __global__ read of size 4 bytes
=========     at void mmvq_new<siq::fmt_iq2_xs, (int)1>(const void *, const void *, float *, int, int)+0x1c0
=========     by thread (226,0,0) in block (3,0,0)
=========     Access to 0x7f2f42800fa0 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f2f42800000 of size 4,000 bytes
=========
========= Invalid __global__ read of size 4 bytes
=========     at void mmvq_new<siq::fmt_iq2_xs, (int)1>(const void *, const void *, float *, int, int)+0x1c0
=========     by thread (227,0,0) in block (3,0,0)
=========     Access to 0x7f2f42800fa4 is out of bounds
=========     and is 5 bytes after the nearest allocation at 0x7f2f42800000 of size 4,000 bytes
=========
strata-case: mmvq/iq2_xs/16x256/n2/seed:1 @0
strata-case: dequant/q8_0/7x768/n1/edge:2 @0
========= Invalid __global__ write of size 2 bytes
=========     at $dequant_rows$_Z9store_rowP6__halfii+0x140
=========     by thread (227,0,0) in block (3,0,0)
=========     Access to 0x7f4fee802fa0 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f4fee802000 of size 10,752 bytes
=========         Device Frame: void dequant_rows<siq::fmt_q8_0>(const void *, __half *, int, int)+0xb0
=========
strata-cases: done
========= ERROR SUMMARY: 3 errors
""")

RACECHECK = _as_printed("""\
========= COMPUTE-SANITIZER
strata-case: q2warp/q2_0/4096x4096/n1/seed:1 @0
========= Error: Race reported between Write access at void q2warp_gemv<(int)8>(const void *, const float *, float *, int)+0xa0
=========     and Read access at void q2warp_gemv<(int)8>(const void *, const float *, float *, int)+0xb0 [256 hazards]
=========
strata-case: q2warp/q2_0/4096x4096/n4/seed:1 @0
========= Error: Race reported between Write access at void q2warp_gemv<(int)8>(const void *, const float *, float *, int)+0xa0
=========     and Read access at void q2warp_gemv<(int)8>(const void *, const float *, float *, int)+0xb0 [1024 hazards]
=========
strata-cases: done
========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)
""")

# Reads of memory nobody wrote: 3 threads in a family kernel, one in CuPy's copy (the harness's), and
# more than the print limit let through.
INITCHECK = _as_printed("""\
========= COMPUTE-SANITIZER
strata-case: swiglu_q8/q8_0/64x1536/n1/seed:1 @0
========= Uninitialized __global__ memory read of size 4 bytes
=========     at swiglu_q8(const float *, const float *, void *, int)+0xc0
=========     by thread (64,0,0) in block (2,0,0)
=========     Address 0x7f93fa802900
=========
========= Uninitialized __global__ memory read of size 4 bytes
=========     at swiglu_q8(const float *, const float *, void *, int)+0xc0
=========     by thread (65,0,0) in block (2,0,0)
=========     Address 0x7f93fa802904
=========
========= Uninitialized __global__ memory read of size 4 bytes
=========     at swiglu_q8(const float *, const float *, void *, int)+0xc0
=========     by thread (66,0,0) in block (2,0,0)
=========     Address 0x7f93fa802908
=========
========= Uninitialized __global__ memory read of size 1 bytes
=========     at cupy_copy__uint8_uint8+0x90
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f93fa900000
=========
strata-cases: done
========= ERROR SUMMARY: 1004 errors
========= ERROR SUMMARY: 1000 errors were not printed. Use --print-limit option to adjust the number of printed errors
""")

SYNCCHECK = _as_printed("""\
========= COMPUTE-SANITIZER
strata-case: grouped/iq4_xs/512x1024/n1/seed:1 @0
========= Barrier error detected. Divergent thread(s) in warp.
=========     at void grouped_rows<siq::fmt_iq4_xs>(const void *, float *, int)+0x70
=========     by thread (0,0,0) in block (0,0,0)
=========
strata-case: grouped/iq4_xs/512x1024/n1/seed:1 @1
========= Barrier error detected. Divergent thread(s) in warp.
=========     at void grouped_rows<siq::fmt_iq4_xs>(const void *, float *, int)+0x70
=========     by thread (0,0,0) in block (0,0,0)
=========
strata-cases: done
========= ERROR SUMMARY: 2 errors
""")

CLEAN = _as_printed("""\
========= COMPUTE-SANITIZER
3 cases selected, 1 of them on real weights (1 fixtures)
strata-case: dequant/iq2_xs/1024x2560/n1/seed:1 @0
strata-case: dequant/iq2_xs/7x768/n1/edge:2 @0
strata-case: dequant/iq2_xs/64x1536/n1/fixture:smollm2-ffn_down.iq2_xs @0
strata-cases: done
3 cases, 0 failures on 1 device; results: /tmp/strata-sanitize-x/nvidia-h200/parity-20261201T230224Z.json
========= ERROR SUMMARY: 0 errors
""")


def lines(report):
    return [f.line() for f in report.findings]


def test_memcheck_one_line_per_case_kernel_and_error():
    report = parse_report("memcheck", MEMCHECK)
    assert lines(report) == [
        "memcheck: mmvq/iq2_xs/16x256/n1/seed:1: mmvq_new<siq::fmt_iq2_xs, (int)1>: "
        "Invalid __global__ read of size 4 bytes (2 reports)",
        "memcheck: dequant/q8_0/7x768/n1/edge:2: dequant_rows<siq::fmt_q8_0>: Invalid __global__ write of size 2 bytes",
    ]
    assert report.cases == ["mmvq/iq2_xs/16x256/n1/seed:1", "mmvq/iq2_xs/16x256/n2/seed:1",
                            "dequant/q8_0/7x768/n1/edge:2"]
    assert (report.errors, report.not_printed, report.started, report.done) == (3, 0, True, True)
    report.exit_code = sanitize.ERROR_EXITCODE
    assert sanitize.problems(report) == []
    assert sanitize.summary_line(report) == "memcheck: 3 cases, 2 findings (0.0 s)"


def test_racecheck_keeps_the_accesses_offsets_and_drops_the_hazard_count():
    report = parse_report("racecheck", RACECHECK)
    assert lines(report) == [
        "racecheck: q2warp/q2_0/4096x4096/n1/seed:1: q2warp_gemv<(int)8>: "
        "Error: Race reported between Write access at +0xa0 and Read access at +0xb0",
        "racecheck: q2warp/q2_0/4096x4096/n4/seed:1: q2warp_gemv<(int)8>: "
        "Error: Race reported between Write access at +0xa0 and Read access at +0xb0",
    ]
    assert (report.errors, report.not_printed) == (2, 0)


def test_initcheck_counts_reports_names_the_harness_and_says_what_was_not_printed():
    report = parse_report("initcheck", INITCHECK)
    report.exit_code = sanitize.ERROR_EXITCODE
    assert lines(report) == [
        "initcheck: swiglu_q8/q8_0/64x1536/n1/seed:1: swiglu_q8: Uninitialized __global__ memory read of size 4 bytes"
        " (3 reports)",
        "initcheck: swiglu_q8/q8_0/64x1536/n1/seed:1: cupy_copy__uint8_uint8 (a CuPy kernel: the harness's, not the "
        "family's): Uninitialized __global__ memory read of size 1 bytes",
    ]
    assert sanitize.problems(report) == [
        f"initcheck: 1000 more errors were not printed (the limit is {sanitize.PRINT_LIMIT}): later cases may have "
        "findings not listed here (see the log)"]


def test_synccheck_on_two_devices_names_the_device():
    report = parse_report("synccheck", SYNCCHECK)
    assert lines(report) == [
        "synccheck: grouped/iq4_xs/512x1024/n1/seed:1 (device 0): grouped_rows<siq::fmt_iq4_xs>: "
        "Barrier error detected. Divergent thread(s) in warp.",
        "synccheck: grouped/iq4_xs/512x1024/n1/seed:1 (device 1): grouped_rows<siq::fmt_iq4_xs>: "
        "Barrier error detected. Divergent thread(s) in warp.",
    ]
    assert report.cases == ["grouped/iq4_xs/512x1024/n1/seed:1 (device 0)", "grouped/iq4_xs/512x1024/n1/seed:1 (device 1)"]


def test_a_clean_run():
    report = parse_report("memcheck", CLEAN)
    report.exit_code = 0
    assert (report.findings, report.errors, len(report.cases), report.done) == ([], 0, 3, True)
    assert sanitize.problems(report) == []
    assert report.tail[-1].startswith("3 cases, 0 failures on 1 device")


def test_api_errors_and_reports_outside_the_cases():
    text = _as_printed("""\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 8 bytes
=========     at warmup+0x10
=========     by thread (0,0,0) in block (0,0,0)
=========
strata-case: q8_1/f32/1x4096/n1/seed:1 @0
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to \
cudaDeviceSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========
strata-cases: done
========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719) due to "unspecified launch failure" on CUDA API call to \
cuModuleUnload.
=========
========= Target application returned an error
========= ERROR SUMMARY: 3 errors
""")
    assert lines(parse_report("memcheck", text)) == [
        "memcheck: (before the first case): warmup: Invalid __global__ read of size 8 bytes",
        'memcheck: q8_1/f32/1x4096/n1/seed:1: CUDA API call cudaDeviceSynchronize: cudaErrorLaunchFailure (error 719) '
        'due to "unspecified launch failure"',
        'memcheck: (after the last case): CUDA API call cuModuleUnload: CUDA_ERROR_LAUNCH_FAILED (error 719) due to '
        '"unspecified launch failure"',
    ]


@pytest.mark.parametrize("text,code,expected", [
    ("========= COMPUTE-SANITIZER\n========= Error: Target application terminated before first instrumented API call\n",
     255, ["memcheck: compute-sanitizer did not run the cases: Error: Target application terminated before first "
           "instrumented API call"]),
    ("bash: compute-sanitizer: cannot execute\n", 126,
     ["memcheck: compute-sanitizer did not run the cases: bash: compute-sanitizer: cannot execute"]),
    ("========= COMPUTE-SANITIZER\nstrata-case: a/b @0\nSegmentation fault\n", -11,
     ["memcheck: the run ended (exit code -11) before the sanitizer's summary: Segmentation fault"]),
    ("========= COMPUTE-SANITIZER\nstrata-case: a/b @0\nstrata-cases: done\n"
     "sanitize: 1 device(s) faulted, the first: kernel fault in a/b [new]\n========= ERROR SUMMARY: 0 errors\n", 1,
     ["memcheck: the launches failed under compute-sanitizer (exit code 1) with no sanitizer error: sanitize: 1 "
      "device(s) faulted, the first: kernel fault in a/b [new]"]),
    ("========= COMPUTE-SANITIZER\nstrata-case: a/b @0\n========= ERROR SUMMARY: 2 errors\n", 86,
     ["memcheck: 2 errors of the summary are not in the report's lines (see the log)"]),
])
def test_problems_of_a_run(text, code, expected):
    report = parse_report("memcheck", text)
    report.exit_code = code
    assert sanitize.problems(report) == expected


def test_a_child_that_stops_before_its_cases_with_parity_s_codes():
    report = parse_report("memcheck", "========= COMPUTE-SANITIZER\nskipped: no usable CUDA GPU (no CUDA device)\n")
    report.exit_code = 77
    with pytest.raises(NoGpu, match=r"^sanitize skipped: skipped: no usable CUDA GPU \(no CUDA device\)$"):
        sanitize.raise_for_child(report)
    report.exit_code = 2
    with pytest.raises(InputError, match="^sanitize: the memcheck run refused its options: skipped"):
        sanitize.raise_for_child(report)
    report.exit_code = 1
    sanitize.raise_for_child(report)  # a failure, told by problems()


@pytest.mark.parametrize("where,name", [
    ("void mmvq_new<siq::fmt_iq2_xs, (int)1>(const void *, const void *, float *, int, int)",
     "mmvq_new<siq::fmt_iq2_xs, (int)1>"),
    ("void tmpl_oob<siq::fmt_q8, (int)2>(const float *, float *, int)", "tmpl_oob<siq::fmt_q8, (int)2>"),
    ("scale_rows_vec4(const float4 *, const float *, float4 *, int, int)", "scale_rows_vec4"),
    ("oob_read", "oob_read"),
    ("$via_fn$_Z7load_atPKfi", "via_fn"),
    ("void (anonymous namespace)::kern<(unsigned int)4>(float *)", "(anonymous namespace)::kern<(unsigned int)4>"),
    ("void f<(bool)1>(void (*)(int), int)", "f<(bool)1>"),
])
def test_kernel_name(where, name):
    assert kernel_name(where) == name


def test_finding_line_counts_only_repeats():
    assert Finding("memcheck", "c", "k", "m").line() == "memcheck: c: k: m"
    assert Finding("memcheck", "c", "k", "m", 4).line() == "memcheck: c: k: m (4 reports)"


@pytest.mark.parametrize("spec,tools", [
    ("memcheck", ("memcheck",)),
    ("memcheck,racecheck,initcheck,synccheck", sanitize.TOOLS),
    (" initcheck , memcheck,initcheck", ("initcheck", "memcheck")),
])
def test_parse_tools(spec, tools):
    assert sanitize.parse_tools(spec) == tools


@pytest.mark.parametrize("spec,what", [("memchek", "unknown tool 'memchek'"), ("memcheck,asan", "unknown tool 'asan'"),
                                       (",", "no tool given")])
def test_parse_tools_refuses(spec, what):
    with pytest.raises(InputError) as info:
        sanitize.parse_tools(spec)
    assert str(info.value) == f"--sanitize: {what}; valid tools: memcheck, racecheck, initcheck, synccheck"


def _executable(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_find_sanitizer_path_then_cuda_path_then_usr_local(tmp_path, monkeypatch):
    monkeypatch.setattr(sanitize, "CUDA_DEFAULT", tmp_path / "default")
    env = {"PATH": str(tmp_path / "bin"), "CUDA_PATH": str(tmp_path / "cuda")}
    with pytest.raises(ToolMissing) as info:
        sanitize.find_sanitizer(env)
    assert str(info.value) == (f"sanitize skipped: compute-sanitizer not found (looked in $PATH, $CUDA_PATH/bin "
                               f"({tmp_path}/cuda/bin), {tmp_path}/default/bin)")
    assert info.value.exit_code == 77
    default = _executable(tmp_path / "default" / "bin" / "compute-sanitizer")
    assert sanitize.find_sanitizer(env) == default
    cuda = _executable(tmp_path / "cuda" / "bin" / "compute-sanitizer")
    assert sanitize.find_sanitizer(env) == cuda
    on_path = _executable(tmp_path / "bin" / "compute-sanitizer")
    assert sanitize.find_sanitizer(env) == on_path


def test_the_command_line_of_each_tool():
    child = ["python3", "-m", "strata_bench", "parity", "--family", "dequant", "-q"]
    common = ["--error-exitcode", "86", "--print-limit", "10000", "--show-backtrace", "device",
              "--destroy-on-device-error", "kernel", "--target-processes", "application-only",
              "--require-cuda-init", "no"]
    assert sanitize.sanitizer_command("/cs", "memcheck", child) == ["/cs", "--tool", "memcheck", *common, *child]
    assert sanitize.sanitizer_command("/cs", "racecheck", child) == [
        "/cs", "--tool", "racecheck", *common, "--racecheck-report", "analysis", *child]


def test_child_env_marks_the_child_and_finds_this_package(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = sanitize.child_env("initcheck")
    root = str(Path(sanitize.__file__).resolve().parents[2])  # the folder holding strata_bench/
    assert env["STRATA_SANITIZE_CHILD"] == "initcheck" and env["PYTHONUNBUFFERED"] == "1"
    assert env["PYTHONPATH"] == f"{root}{os.pathsep}/elsewhere"


def test_run_tool_reads_a_stand_in_sanitizer_as_it_prints(tmp_path):
    """A stand-in that prints the memcheck sample and exits as compute-sanitizer does on errors: the report,
    its exit code, the log holding the command and every line, the child's environment."""
    (tmp_path / "report.txt").write_text(MEMCHECK)
    fake = tmp_path / "compute-sanitizer"
    fake.write_text(f"#!{sys.executable}\nimport os, sys\n"
                    f"sys.stdout.write(open({str(tmp_path / 'report.txt')!r}).read())\n"
                    "print('child env:', os.environ['STRATA_SANITIZE_CHILD'], 'argv:', ' '.join(sys.argv[1:3]))\n"
                    "sys.exit(86)\n")
    fake.chmod(0o755)
    log = tmp_path / "sanitize-memcheck.log"
    told = []
    report = sanitize.run_tool(fake, "memcheck", ["child", "--x"], log, on_case=told.append)
    assert report.exit_code == 86 and report.log == log
    assert [c.removesuffix(" @0") for c in told] == report.cases and told  # each case as its marker came
    assert lines(report) == lines(parse_report("memcheck", MEMCHECK))
    assert report.tail[-1] == "child env: memcheck argv: --tool memcheck"
    text = log.read_text()
    assert text.splitlines()[0] == "# " + " ".join(sanitize.sanitizer_command(fake, "memcheck", ["child", "--x"]))
    assert MEMCHECK in text


def test_a_finding_names_the_variant_it_followed_and_none_before_the_first():
    report = parse_report("memcheck", """========= COMPUTE-SANITIZER
strata-case: mmvq/q8_0/4x32/n1/seed:1 @0
========= Invalid __global__ write of size 4 bytes
=========     at cupy_copy__float32_float32+0x10
=========
strata-variant: old
strata-variant: new
========= Invalid __global__ read of size 4 bytes
=========     at void mmvq_new<siq::fmt_q8_0, 1>(const void *, float *, int)+0xc0
=========
strata-case: mmvq/q8_0/8x32/n1/seed:1 @0
========= Invalid __global__ read of size 4 bytes
=========     at void mmvq_new<siq::fmt_q8_0, 1>(const void *, float *, int)+0xc0
=========
strata-cases: done
========= ERROR SUMMARY: 3 errors
""")
    assert [f.line() for f in report.findings] == [
        "memcheck: mmvq/q8_0/4x32/n1/seed:1: cupy_copy__float32_float32 (a CuPy kernel: the harness's, not the "
        "family's): Invalid __global__ write of size 4 bytes",
        "memcheck: mmvq/q8_0/4x32/n1/seed:1 [new]: mmvq_new<siq::fmt_q8_0, 1>: Invalid __global__ read of size 4 bytes",
        "memcheck: mmvq/q8_0/8x32/n1/seed:1: mmvq_new<siq::fmt_q8_0, 1>: Invalid __global__ read of size 4 bytes"]


def test_the_child_runs_its_plan_s_cases_and_variants_in_the_plan_s_order():
    from strata_bench.cases import Case
    from strata_bench.gpu.sanitize_child import narrowed

    a, b = Case("f", "q8_0", 4, 32, variants=("old", "new")), Case("f", "q8_0", 8, 32, variants=("old", "new"))
    assert narrowed([a, b], None) == [a, b]
    assert narrowed([a, b], {b.name: ["new"], a.name: ["old", "new"]}) == [
        Case("f", "q8_0", 8, 32, variants=("new",)), a]
    with pytest.raises(InputError, match="the plan names 1 case"):
        narrowed([a], {b.name: ["new"]})
