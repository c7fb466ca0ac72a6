"""Build and `strata-bench compile`: NVRTC options, cache, resources, compile errors, --arch without a GPU."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from strata_bench.kernels import build

from strata_bench.kernels import jobs as buildplan
from strata_bench.cli.main import cli
from strata_bench.errors import InputError

CASE_FILE = '''
from strata_bench.cases import Family


class _CompileOnly(Family):
    """Enough of a family to compile; nothing here runs."""

    def default_cases(self): return []
    def make_inputs(self, case): return {}
    def to_device(self, case, host): return {}
    def alloc_outputs(self, case, dev): return {}
    def launch(self, case, variant, kernels, dev, outs, stream=None): pass
    def reference(self, case, host): return []


class TinyFamily(_CompileOnly):
    name = "tiny_test"
    sources = ("tiny.cu",)

    def name_expressions(self, source): return ["scale_k<64>", "uses_smem", "uses_stack"]


class BrokenFamily(_CompileOnly):
    name = "broken_test"
    sources = ("bad.cu",)

    def name_expressions(self, source): return ["broken"]
'''

TINY_CU = textwrap.dedent("""\
    #include "inc/scale.cuh"
    template <int N>
    __global__ void scale_k(float* x) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < N) x[i] *= SCALE; }
    extern "C" __global__ void uses_smem(float* x) {
        __shared__ float tile[256];
        tile[threadIdx.x] = x[threadIdx.x];
        __syncthreads();
        x[threadIdx.x] = tile[255 - threadIdx.x];
    }
    extern "C" __global__ void uses_stack(float* x, int k) {
        float local[512];
        for (int i = 0; i < k; ++i) local[i & 511] = x[i];
        x[threadIdx.x] = local[x[k] > 0.0f ? k & 511 : 0];
    }
    """)

# Line 3 holds the error, so the log must say bad.cu(3).
BAD_CU = "// broken on purpose\nextern \"C\" __global__ void broken(float* x) {\n    x[0] = undefined_symbol;\n}\n"


@pytest.fixture
def kernel_dir(tmp_path: Path) -> Path:
    root = tmp_path / "kernels"
    (root / "inc").mkdir(parents=True)
    (root / "inc" / "scale.cuh").write_text("#pragma once\n#define SCALE 2.0f\n")
    (root / "tiny.cu").write_text(TINY_CU)
    (root / "bad.cu").write_text(BAD_CU)
    return root


@pytest.fixture
def case_file(tmp_path: Path) -> Path:
    path = tmp_path / "cases_for_test.py"
    path.write_text(CASE_FILE)
    return path


def invoke(*args: str, env: dict | None = None):
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


# ---------------------------------------------------------------- pure parts (no NVRTC)

def test_parse_archs_normalizes_splits_and_dedups():
    assert buildplan.parse_archs(["75,80", "sm_90", "80"]) == ["sm_75", "sm_80", "sm_90"]


@pytest.mark.parametrize("bad", ["foo", "70", "sm_6x"])
def test_parse_archs_rejects_bad_values(bad):
    with pytest.raises(InputError, match="architecture"):
        buildplan.parse_archs([bad])


def test_options_are_deliberate_and_recorded_without_local_paths():
    opts = build.compile_options("sm_90")
    for flag in ("-std=c++17", "-ftz=false", "--no-cache", "--gpu-architecture=sm_90", "-Xptxas=-v"):
        assert flag in opts
    recorded = build.recorded_options("sm_90")
    assert not [o for o in recorded if o.startswith("-I/")], recorded
    assert "-I<kernels_src>" in recorded


def test_parse_resources_reads_ptxas_log():
    log = textwrap.dedent("""\
        ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_90'
        ptxas info    : Function properties for _Z3fooPf
            16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
        ptxas info    : Used 40 registers, used 0 barriers, 1024 bytes smem, 360 bytes cmem[0]
        ptxas info    : Compiling entry function 'bar' for 'sm_90'
        ptxas info    : Function properties for bar
            0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
        ptxas info    : Used 8 registers, used 1 barriers, 352 bytes cmem[0]
        ptxas info    : Compiling entry function 'old' for 'sm_90'
        ptxas info    : Function properties for old
            0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
        ptxas info    : Used 6 registers, 352 bytes cmem[0]
        """)
    res = build.parse_resources(log, {"foo<1>": "_Z3fooPf", "bar": "bar"})
    # A log without the barrier count (an older ptxas) leaves it unknown, not 0.
    assert res == [build.KernelResources("foo<1>", 40, 8, 4, 1024, 16, 0),
                   build.KernelResources("bar", 8, 0, 0, 0, 0, 1),
                   build.KernelResources("old", 6, 0, 0, 0, 0, None)]


def test_kernels_without_cases_is_a_usage_error(kernel_dir):
    result = CliRunner().invoke(cli, ["compile", "--arch", "90", "--kernels", str(kernel_dir)])
    assert result.exit_code == 2
    assert "--cases" in result.stderr


def test_unknown_family_lists_the_registered_ones(kernel_dir, case_file, family_registry):
    result = CliRunner().invoke(cli, ["compile", "--arch", "90", "--kernels", str(kernel_dir),
                                      "--cases", str(case_file), "--family", "nope"])
    assert result.exit_code == 2
    assert "unknown family 'nope'" in result.stderr and "tiny_test" in result.stderr


def test_bad_arch_exits_2():
    result = CliRunner().invoke(cli, ["compile", "--arch", "70"])
    assert result.exit_code == 2
    assert "sm_70" in result.stderr


@pytest.mark.skipif("__import__('strata_bench.gpu.devices').gpu.devices.probe().usable", reason="host has a GPU")
def test_no_arch_on_gpu_less_host_exits_77(kernel_dir, case_file, family_registry):
    result = CliRunner().invoke(cli, ["compile", "--kernels", str(kernel_dir), "--cases", str(case_file),
                                      "--family", "tiny_test"])
    assert result.exit_code == 77
    assert result.stderr.startswith("skipped: no usable CUDA GPU (")


# ---------------------------------------------------------------- NVRTC (compile-only, no GPU)

@pytest.mark.nvrtc
def test_compile_error_prints_nvrtc_log_with_file_line_and_exits_2(kernel_dir, case_file, family_registry,
                                                                     cubin_cache):
    # The brief's setup: STRATA_KERNELS_SRC points at the user's directory, the case file names the family.
    result = CliRunner().invoke(cli, ["compile", "--arch", "90", "--cases", str(case_file),
                                      "--family", "broken_test"], env={"STRATA_KERNELS_SRC": str(kernel_dir)})
    assert result.exit_code == 2, result.output
    assert "bad.cu(3): error" in result.stderr
    assert "undefined_symbol" in result.stderr
    assert "FAILED" in result.stdout


@pytest.mark.nvrtc
def test_compile_for_named_archs_and_resources(kernel_dir, case_file, family_registry, cubin_cache):
    result = invoke("compile", "--arch", "75,90", "--kernels", str(kernel_dir), "--cases", str(case_file),
                    "--family", "tiny_test", "--resources")
    assert result.exit_code == 0, result.output
    assert "tiny_test:tiny.cu" in result.stdout and "sm_75" in result.stdout
    assert "2 compile(s): 2 ok (0 cached), 0 failed" in result.stdout
    outcome = buildplan.run_job(_tiny_job(kernel_dir, "sm_90"))
    by_kernel = {r.kernel: r for r in outcome.resources}
    assert set(by_kernel) == {"scale_k<64>", "uses_smem", "uses_stack"}
    assert by_kernel["uses_smem"].shared_bytes == 256 * 4
    assert by_kernel["uses_stack"].stack_bytes >= 512 * 4  # the dynamically indexed array lives on the stack
    assert all(r.registers > 0 for r in outcome.resources)


def _tiny_job(root: Path, arch: str) -> buildplan.CompileJob:
    return buildplan.CompileJob("tiny_test", "tiny.cu", arch, ("scale_k<64>", "uses_smem", "uses_stack"), root)


@pytest.mark.nvrtc
def test_cache_hits_then_misses_after_a_header_byte_changes(kernel_dir, cubin_cache):
    job = _tiny_job(kernel_dir, "sm_80")
    first, second = buildplan.run_job(job), buildplan.run_job(job)
    assert (first.ok, first.cache_hit) == (True, False)
    assert (second.ok, second.cache_hit) == (True, True)
    assert second.resources == first.resources  # the cached log still yields resources
    header = kernel_dir / "inc" / "scale.cuh"
    header.write_bytes(header.read_bytes().replace(b"2.0f", b"3.0f"))
    third = buildplan.run_job(job)
    assert (third.ok, third.cache_hit) == (True, False)
    assert buildplan.run_job(job, use_cache=False).cache_hit is False


@pytest.mark.nvrtc
def test_cli_second_compile_reports_cached(kernel_dir, case_file, family_registry, cubin_cache):
    args = ("compile", "--arch", "86", "--kernels", str(kernel_dir), "--cases", str(case_file),
            "--family", "tiny_test")
    assert "0 cached" in invoke(*args).stdout
    again = invoke(*args)
    assert "1 ok (1 cached)" in again.stdout and "cached" in again.stdout
    assert "1 ok (0 cached)" in invoke(*args, "--no-cache").stdout


@pytest.mark.slow  # about 9 minutes on 2 cores: every kernel of every family, 4 times, into an empty cache
@pytest.mark.nvrtc
def test_compile_real_kernels_src_for_ci_archs(cubin_cache):
    """The issue's acceptance check: every built-in family for sm_75, 80, 90 and 120, no GPU."""
    result = invoke("compile", "--arch", "75,80,90,120")
    assert result.exit_code == 0, result.output
    assert " 0 failed" in result.stdout


@pytest.mark.nvrtc
def test_shared_headers_of_kernels_src_compile_for_oldest_and_newest_arch(tmp_path, cubin_cache):
    """The headers every family includes (common/, generated/) compile on their own for sm_75 and sm_120."""
    from strata_bench.kernels.sources import kernels_dir, source_files

    shared = [p.relative_to(kernels_dir()).as_posix() for p in source_files()
              if p.suffix in (".cuh", ".h") and p.relative_to(kernels_dir()).parts[0] in ("common", "generated")]
    assert shared, "kernels_src has no shared headers"
    unit = tmp_path / "headers.cu"
    unit.write_text("".join(f'#include "{h}"\n' for h in shared)
                    + 'extern "C" __global__ void touch(int* x) { x[0] = 1; }\n')
    for arch in ("sm_75", "sm_120"):
        outcome = buildplan.run_job(buildplan.CompileJob("headers", "headers.cu", arch, ("touch",), tmp_path))
        assert outcome.ok, outcome.error
