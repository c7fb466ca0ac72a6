"""TOML variants built by nvcc (compiler = "nvcc") or given as a prebuilt cubin/fatbin (binary = ...): the
keys parse, nvcc builds the variant's file as an engine would (host code, standard headers), the kernels
are found in the cubin by their declared names, and every failure is one line naming the file and key."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from strata_bench.toml_abi.variant import load_variant_files, parse_variant_file
from strata_bench.errors import InputError
from strata_bench.kernels import build
from strata_bench.kernels.sources import kernels_dir
from tests.toml_abi.conftest import toml_error

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                                reason="nvcc is not installed on this host")

# A dequant variant as an engine writes it: C++ standard headers, host code that launches every instance
# (which is what instantiates them: nvcc has no name expressions), printf on the host.
ENGINE_CU = r"""
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>
#include "dequant/dequant.cuh"

namespace engine {
template <class F>
__global__ void dequant_rows(const uint8_t* __restrict__ w, long long stride, int rows, int nchunks,
                             float* __restrict__ y) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)rows * nchunks) return;
    const long long row = t / nchunks;
    const int c = (int)(t % nchunks);
    float v[32];
    deq::Deq<F>::chunk(w + row * stride + (c / F::CHUNKS) * F::BYTES, c % F::CHUNKS, v);
    for (int i = 0; i < 32; ++i) y[t * 32 + i] = v[i] * ENGINE_SCALE;
}

template <class F>
static void launch(const uint8_t* w, long long stride, int rows, int nchunks, float* y, cudaStream_t s) {
    const long long n = (long long)rows * nchunks;
    dequant_rows<F><<<(unsigned)((n + 127) / 128), 128, 0, s>>>(w, stride, rows, nchunks, y);
}
}  // namespace engine

void engine_dequantize(int type, const uint8_t* w, long long stride, int rows, int nchunks, float* y,
                       cudaStream_t s) {
    using namespace siq;
    switch (type) {
        case 0: engine::launch<fmt_iq2_xxs>(w, stride, rows, nchunks, y, s); break;
        case 1: engine::launch<fmt_iq2_xs>(w, stride, rows, nchunks, y, s); break;
        case 2: engine::launch<fmt_iq2_s>(w, stride, rows, nchunks, y, s); break;
        case 3: engine::launch<fmt_iq3_xxs>(w, stride, rows, nchunks, y, s); break;
        case 4: engine::launch<fmt_iq3_s>(w, stride, rows, nchunks, y, s); break;
        case 5: engine::launch<fmt_iq1_s>(w, stride, rows, nchunks, y, s); break;
        case 6: engine::launch<fmt_iq1_m>(w, stride, rows, nchunks, y, s); break;
        case 7: engine::launch<fmt_iq4_nl>(w, stride, rows, nchunks, y, s); break;
        case 8: engine::launch<fmt_iq4_xs>(w, stride, rows, nchunks, y, s); break;
        case 9: engine::launch<fmt_q8_0>(w, stride, rows, nchunks, y, s); break;
        case 10: engine::launch<fmt_q2_0>(w, stride, rows, nchunks, y, s); break;
        default: std::fprintf(stderr, "engine: unknown type %d\n", type);
    }
}
"""

TOML = '''[[variant]]
family = "dequant"
name = "engine"
compiler = "nvcc"
sources = ["engine.cu"]
flags = ["-std=c++17", "-O3"]
defines = { ENGINE_SCALE = "1.0f" }
kernel = "engine::dequant_rows<{traits}>"
grid = ["ceil_div(rows * nchunks, 128)"]
block = [128]
args = ["w", "stride", "rows", "nchunks", "y"]
'''



@pytest.fixture
def folder(tmp_path):
    (tmp_path / "engine.cu").write_text(ENGINE_CU)
    return tmp_path


def _write(folder, text, name="v.toml"):
    (folder / name).write_text(text)
    return folder / name


def test_nvcc_keys_parse_into_the_build(families, folder):
    path = _write(folder, TOML)
    (tv,) = parse_variant_file(path, families)
    assert (tv.compiler, tv.flags) == ("nvcc", ("-std=c++17", "-O3"))
    # nvcc: the engine's flags first, then -I (the variant's folder, kernels_src) and -D
    assert tv.options() == ("-std=c++17", "-O3", f"-I{folder}", f"-I{kernels_dir()}", "-DENGINE_SCALE=1.0f")
    spec = tv.build()
    assert (spec.compiler, spec.path, spec.where, spec.one_program) == ("nvcc", folder / "engine.cu",
                                                                        f"{path}: variant 'engine'", True)
    assert load_variant_files((str(path),), families) == [("dequant", "engine")]
    dequant = families["dequant"]
    source = str(folder / "engine.cu")
    assert dequant.source_build(source) == spec and build.programs(dequant, source) == [
        tuple(f"engine::dequant_rows<siq::fmt_{f}>" for f in ("iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s",
                                                               "iq1_s", "iq1_m", "iq4_nl", "iq4_xs", "q8_0", "q2_0"))]


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvcc_variant_compiles_and_its_kernels_are_found(families, folder, cubin_cache, arch):
    load_variant_files((str(_write(folder, TOML)),), families)
    dequant = families["dequant"]
    source = str(folder / "engine.cu")
    (compiled,) = [build.compile_unit(dequant, source, exprs, arch) for exprs in build.programs(dequant, source)]
    assert compiled.source == source and compiled.arch == arch and compiled.options[1:3] == ("-cubin", f"-arch={arch}")
    assert compiled.lowered["engine::dequant_rows<siq::fmt_q8_0>"] == (
        "_ZN6engine12dequant_rowsIN3siq8fmt_q8_0EEEvPKhxiiPf")
    resources = build.parse_resources(compiled.log, compiled.lowered)
    assert sorted(r.kernel for r in resources) == sorted(compiled.lowered)
    assert build.compile_unit(dequant, source, tuple(compiled.lowered), arch).cache_hit


@needs_nvcc
def test_a_kernel_the_cubin_lacks_is_one_line_at_compile(families, folder, cubin_cache):
    # Declared in the text (so reading the file passes), but host code instantiates only 10 formats.
    (folder / "engine.cu").write_text(ENGINE_CU.replace("case 10: engine::launch<fmt_q2_0>", "case 10: (void)0;//"))
    path = _write(folder, TOML)
    result = CliRunner().invoke(_cli(), ["compile", "--variants", str(path), "--arch", "90", "--family", "dequant"])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        f"{path}: variant 'engine': kernel: kernel 'engine::dequant_rows<siq::fmt_q2_0>' matches no kernel of the "
        "cubin (kernels: engine::dequant_rows<siq::fmt_iq1_m>, engine::dequant_rows<siq::fmt_iq1_s>, "
        "engine::dequant_rows<siq::fmt_iq2_s>, engine::dequant_rows<siq::fmt_iq2_xs>, "
        "engine::dequant_rows<siq::fmt_iq2_xxs>, engine::dequant_rows<siq::fmt_iq3_s>, "
        "engine::dequant_rows<siq::fmt_iq3_xxs>, engine::dequant_rows<siq::fmt_iq4_nl>, ... (2 more))"]


@needs_nvcc
def test_a_compile_error_names_the_variant_and_nvccs_first_lines(families, folder, cubin_cache):
    (folder / "engine.cu").write_text(ENGINE_CU.replace("float v[32];", "float v[32]; undefined_call();"))
    path = _write(folder, TOML)
    result = CliRunner().invoke(_cli(), ["compile", "--variants", str(path), "--arch", "90", "--family", "dequant"])
    assert result.exit_code == 2
    assert f"nvcc failed: {path}: variant 'engine' ({folder / 'engine.cu'}) for sm_90 (exit " in result.stderr
    assert 'engine.cu(15): error: identifier "undefined_call" is undefined' in result.stderr
    assert not list(cubin_cache.glob("nvcc-*"))  # nothing half-written


def test_missing_nvcc_is_one_line_exit_2_at_compile(families, folder, cubin_cache, monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "no-toolkit"))
    path = _write(folder, TOML)
    result = CliRunner().invoke(_cli(), ["compile", "--variants", str(path), "--arch", "90", "--family", "dequant"])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [f"nvcc not found (looked in {tmp_path}/no-toolkit/bin/nvcc; set CUDA_PATH "
                                          "to a CUDA toolkit)"]


def test_missing_nvcc_skips_a_gpu_run_with_77():
    from strata_bench.cli.gpu_run import compilers_for_gpu_run
    from strata_bench.errors import ToolMissing
    from strata_bench.kernels.nvcc import NvccMissing

    with pytest.raises(ToolMissing) as err, compilers_for_gpu_run():
        raise NvccMissing("nvcc not found (looked in PATH, /usr/local/cuda/bin; set CUDA_PATH to a CUDA toolkit)")
    assert err.value.exit_code == 77 and str(err.value).endswith("; the GPU run is skipped")


@needs_nvcc
def test_a_prebuilt_cubin_and_fatbin_are_variants(families, folder, cubin_cache, tmp_path):
    from strata_bench.kernels import nvcc, variant_build

    # The cubins come from nvcc here; a user brings their own.
    options = ("-std=c++17", f"-I{kernels_dir()}", "-DENGINE_SCALE=1.0f")
    built = nvcc.compile_cubin(folder / "engine.cu", "sm_90", options, None)
    (folder / "engine_sm90.cubin").write_bytes(built.cubin)
    text = TOML.replace('compiler = "nvcc"\nsources = ["engine.cu"]\nflags = ["-std=c++17", "-O3"]\n'
                        'defines = { ENGINE_SCALE = "1.0f" }\n', 'binary = "engine_sm90.cubin"\n')
    path = _write(folder, text)
    (tv,) = parse_variant_file(path, families)
    assert tv.compiler == "binary" and tv.options() == ()
    load_variant_files((str(path),), families)
    dequant = families["dequant"]
    source = str(folder / "engine_sm90.cubin")
    (exprs,) = build.programs(dequant, source)
    compiled = build.compile_unit(dequant, source, exprs, "sm_90")
    assert compiled.cubin == built.cubin and compiled.options == (f"binary={folder / 'engine_sm90.cubin'}",)
    record = variant_build.builds_of({"dequant": dequant})[0][2].record("sm_90")
    assert record == {"compiler": "binary", "binary": source, "sha256": __import__("hashlib").sha256(
        built.cubin).hexdigest()}
    with pytest.raises(InputError) as err:
        build.compile_unit(dequant, source, exprs, "sm_80")
    assert str(err.value) == f"{path}: variant 'engine': binary engine_sm90.cubin: a cubin for sm_90, not sm_80"


@pytest.mark.parametrize("change,line", [
    (('compiler = "nvcc"', 'compiler = "gcc"'), "compiler: 'gcc' is not a compiler (compilers: nvrtc, nvcc)"),
    (('flags = ["-std=c++17", "-O3"]', 'flags = "-O3"'), "flags: expected a list of compiler options (each "
                                                         "starting with -), got '-O3'"),
    (('sources = ["engine.cu"]', 'sources = ["engine.cu"]\nbinary = "engine.cu"'),
     "sources: a variant with a prebuilt binary has no sources (it is not compiled)"),
    (('kernel = "engine::dequant_rows<{traits}>"', 'kernel = "engine::dequant_row<{traits}>"'),
     "kernel: 'engine::dequant_row' is not declared in engine.cu or the headers it includes (__global__ functions "
     "there: dequant_rows)"),
    (('"nchunks", "y"]', '"y"]'), "args: 4 arguments for the 5 parameters of dequant_rows (engine.cu:9)"),
    (('"nchunks", "y"]', '"nchunks", "rows", "y"]'), "args[4]: 'rows' is listed twice (args[2] too)"),
    (('block = [128]', 'block = [2048]'), "block: [2048] is 2048 threads (a block holds at most 1024; x and y at "
                                          "most 1024, z at most 64)"),
    (('block = [128]', 'block = [1, 1, 128]'), "block: [1, 1, 128] is 128 threads (a block holds at most 1024; "),
    # A variant's own architecture replaced --arch's: an sm_80 cubin cached under the sm_90 key, exit 0.
    *((('"-O3"]', flags), f"flags: {chooser!r} chooses the architecture, which --arch sets (remove it)")
      for flags, chooser in (('"-arch=sm_80"]', "-arch=sm_80"), ('"-arch sm_80"]', "-arch sm_80"),
                             ('"-arch", "sm_80"]', "-arch"), ('"--gpu-architecture=sm_80"]', "--gpu-architecture=sm_80"),
                             ('"-gencode=arch=compute_80,code=sm_80"]', "-gencode=arch=compute_80,code=sm_80"),
                             ('"--generate-code", "arch=compute_80"]', "--generate-code"),
                             ('"--gpu-code=sm_80"]', "--gpu-code=sm_80"), ('"-code=sm_80"]', "-code=sm_80"))),
])
def test_errors_name_file_variant_and_key(families, folder, change, line):
    text = TOML.replace(*change)
    assert text != TOML
    path = _write(folder, text)
    assert toml_error(path, families).startswith(f"{path}: variant 'engine': {line}")
    assert families["dequant"].default_variants == ("dequant",)


def test_two_variants_of_one_file_with_other_defines_build_apart(families, folder):
    second = TOML.replace('name = "engine"', 'name = "engine2"').replace('"1.0f"', '"2.0f"')
    load_variant_files((str(_write(folder, TOML + "\n" + second)),), families)
    dequant = families["dequant"]
    source = str(folder / "engine.cu")
    assert dequant.sources[-2:] == (source, f"{source}@engine2")
    assert dequant.source_build(source).options[-1] == "-DENGINE_SCALE=1.0f"
    assert dequant.source_build(f"{source}@engine2").options[-1] == "-DENGINE_SCALE=2.0f"
    assert dequant.name_expressions(f"{source}@engine2") == dequant.name_expressions(source)


def _cli():
    from strata_bench.cli.main import cli

    return cli


@needs_nvcc
def test_provenance_records_the_exact_command_and_nvccs_version(families, folder, monkeypatch):
    from strata_bench.kernels import nvcc
    from strata_bench.results import provenance

    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    load_variant_files((str(_write(folder, TOML)),), families)
    (record,) = provenance.variant_builds("sm_90", families)
    tool = nvcc.find_nvcc()
    assert record == {"family": "dequant", "source": str(folder / "engine.cu"), "compiler": "nvcc",
                      "version": nvcc.nvcc_version(tool),
                      "command": [tool, "-cubin", "-arch=sm_90", "-std=c++17", "-O3", f"-I{folder}",
                                  f"-I{_shown(kernels_dir())}", "-DENGINE_SCALE=1.0f", "-Xptxas=-v", "-o",
                                  "<cubin>", str(folder / "engine.cu")]}


def _shown(path) -> str:
    """How results name a path: relative to the working directory when inside it."""
    import os

    return str(path).replace(os.getcwd().rstrip("/") + "/", "")


@needs_nvcc
def test_results_name_paths_under_the_working_directory_relative_to_it(folder, families, monkeypatch):
    from strata_bench.results import provenance

    monkeypatch.chdir(folder.parent)  # the variant's folder is now inside the working directory
    load_variant_files((str(_write(folder, TOML)),), families)
    (record,) = provenance.variant_builds("sm_90", families)
    assert record["source"] == f"{folder.name}/engine.cu"
    assert f"-I{folder.name}" in record["command"] and record["command"][-1] == f"{folder.name}/engine.cu"
    assert not any(str(folder.parent) in str(v) for v in record.values())


def test_a_mistyped_kernel_is_one_line_at_list(folder):
    path = _write(folder, TOML.replace("engine::dequant_rows<{traits}>", "engine::dequant_rowz<{traits}>"))
    result = CliRunner().invoke(_cli(), ["parity", "--variants", str(path), "--family", "dequant", "--list"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"{path}: variant 'engine': kernel: 'engine::dequant_rowz' is not declared in engine.cu or the headers it "
        "includes (__global__ functions there: dequant_rows)"]
