"""ggml/build.py's NVRTC build: which compiler a tree gets (STRATA_GGML_COMPILER, else nvcc where found, else
NVRTC), the options, prelude and stub headers it compiles with, and, where NVRTC and the pinned tree can be
had, a real compile of a few instances (with a toolkit's host headers on the path and without them)."""
from __future__ import annotations

from pathlib import Path

import pytest

from strata_bench.errors import CompileError, InputError
from strata_bench.cases.spec import RunSpec
from strata_bench.runs.catalog import build_catalog
from strata_bench.ggml import build, nvrtc_prelude
from strata_bench.ggml.tree import CONVERT, MMVQ, QUANTIZE, locate
from strata_bench.kernels import build as kbuild
from strata_bench.kernels import nvcc, nvrtc


def _no_nvcc():
    raise nvcc.NvccMissing("nvcc not found (looked in PATH, /usr/local/cuda/bin; set CUDA_PATH to a CUDA toolkit)")


@pytest.fixture
def cache(monkeypatch, tmp_path) -> Path:
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_environment_chooses_the_compiler_else_nvcc_where_it_can_build_else_nvrtc(monkeypatch):
    monkeypatch.setattr(nvcc, "find_nvcc", lambda: "/opt/cuda/bin/nvcc")
    monkeypatch.delenv(build.COMPILER_ENV, raising=False)
    monkeypatch.setattr(build, "cublas_include_dirs", lambda: [])  # the toolkit has cuBLAS's headers
    assert build.compiler() == "nvcc"

    def no_cublas():
        raise InputError("--ggml: the CUDA toolkit at /opt/cuda has no cublas_v2.h")

    monkeypatch.setattr(build, "cublas_include_dirs", no_cublas)
    assert build.compiler() == "nvrtc"  # nvcc could not take ggml's headers: NVRTC's stubs can
    monkeypatch.setattr(nvcc, "find_nvcc", _no_nvcc)
    assert build.compiler() == "nvrtc"
    monkeypatch.setenv(build.COMPILER_ENV, "nvcc")
    assert build.compiler() == "nvcc"  # asked for: a missing nvcc is then the build's one-line error
    monkeypatch.setenv(build.COMPILER_ENV, "NVRTC")
    assert build.compiler() == "nvrtc"
    monkeypatch.setenv(build.COMPILER_ENV, "clang")
    with pytest.raises(InputError) as err:
        build.compiler()
    assert str(err.value) == "STRATA_GGML_COMPILER=clang: expected one of nvcc, nvrtc"


def test_without_nvcc_the_tree_is_built_by_nvrtc_with_ggmls_float_options_and_the_stubs_first(
        fake_tree, monkeypatch, cache):
    monkeypatch.delenv(build.COMPILER_ENV, raising=False)
    monkeypatch.setattr(nvcc, "find_nvcc", _no_nvcc)
    tree = locate(fake_tree)
    spec = build.source_build(tree, MMVQ, "--ggml variant 'ggml'")
    assert (spec.compiler, spec.path, spec.whole, spec.one_program) == ("nvrtc", tree.path(MMVQ), True, True)
    assert spec.options == ("-default-device", "--pre-include=strata_prelude.h", "-DNDEBUG", "-ftz=true",
                            "-prec-div=false", "-prec-sqrt=false", "-use_fast_math", f"-I{tree.root}/include",
                            f"-I{tree.root}/src", f"-I{tree.root}/src/ggml-cuda")
    assert spec.build_options() == spec.options  # no cuBLAS folder: the stubs stand in for its header
    (first,) = spec.leading_options()
    stubs = Path(first.removeprefix("-I"))
    assert stubs.parent == cache and stubs.name.startswith("ggml-nvrtc-include-")
    assert sorted(p.name for p in stubs.iterdir()) == sorted(nvrtc_prelude.headers())
    for name in (*nvrtc_prelude.STD_NAMES, *nvrtc_prelude.HOST_NAMES):
        assert (stubs / name).read_text().startswith("#pragma once\n#include \"strata_")
    assert spec.leading_options() == (first,)  # the same folder again
    # The project's IEEE float options give way to ggml's; the stubs precede every other folder.
    assert kbuild.base_options(spec.options) == ("-std=c++17", "--no-cache")
    options = kbuild.compile_options("sm_90", spec.options, first=spec.leading_options())
    folders = [o for o in options if o.startswith("-I")]
    assert folders[0] == first and folders[-3:] == list(spec.options[-3:])
    record = spec.record("sm_90")  # what results keep: the options as compiled, and the tree
    assert record["compiler"] == "nvrtc" and record["options"] == list(options)
    assert (record["ggml_tree"], record["ggml_sha256"]) == (str(tree.root), tree.content_hash)


def test_with_nvrtc_each_source_is_one_program_of_every_kernel_it_launches(fake_tree, monkeypatch, cache):
    from strata_bench.ggml.variants import attach

    monkeypatch.setenv(build.COMPILER_ENV, "nvrtc")
    families = build_catalog(RunSpec())  # a run's own catalog: ggml's variants stay in it
    tree = locate(fake_tree)
    attach(families, tree)
    for name, source in (("mmvq", MMVQ), ("dequant", CONVERT), ("q8_1", QUANTIZE)):
        family, unit = families[name], f"{tree.path(source)}@ggml"
        assert family.source_build(unit).compiler == "nvrtc"
        (program,) = kbuild.programs(family, unit)
        assert program == tuple(family.name_expressions(unit))
    assert len(kbuild.programs(families["mmvq"], f"{tree.path(MMVQ)}@ggml")[0]) > kbuild.PROGRAM_KERNELS


def test_a_host_without_nvrtc_is_told_in_one_line(fake_tree, monkeypatch, cache):
    monkeypatch.setenv(build.COMPILER_ENV, "nvrtc")
    spec = build.source_build(locate(fake_tree), QUANTIZE, "--ggml variant 'ggml'")
    monkeypatch.setattr(kbuild, "missing_toolkit_headers", lambda *_a: [])

    def unavailable():
        raise nvrtc.NvrtcUnavailable("NVRTC is not loadable (none found); install '.[dev]', '.[cuda13]' or "
                                     "'.[cuda12]'")

    monkeypatch.setattr(kbuild, "nvrtc_version", unavailable)
    with pytest.raises(nvrtc.NvrtcUnavailable) as err:
        spec.compile("unit", ["quantize_q8_1"], "90", use_cache=False)
    assert "\n" not in str(err.value)


def _nvrtc_or_skip() -> None:
    try:
        nvrtc.version()
    except nvrtc.NvrtcUnavailable as exc:
        pytest.skip(f"NVRTC is not loadable here: {exc}")
    if not kbuild.cuda_include_dirs():
        pytest.skip("no CUDA headers (cuda_fp16.h) for NVRTC: neither a toolkit nor pip's nvidia wheels")


@pytest.mark.nvrtc
def test_a_fake_tree_that_cannot_compile_names_its_source(fake_tree, monkeypatch, cache):
    _nvrtc_or_skip()
    monkeypatch.setenv(build.COMPILER_ENV, "nvrtc")
    tree = locate(fake_tree)
    spec = build.source_build(tree, QUANTIZE, "--ggml variant 'ggml'")
    with pytest.raises(CompileError) as err:  # the fake kernel's types come from headers it does not include
        spec.compile("unit", ["quantize_q8_1"], "90", use_cache=False)
    assert str(err.value).splitlines()[0] == f"compile failed: {tree.path(QUANTIZE)} for sm_90"


def _poisoned_toolkit(tmp_path: Path) -> Path:
    """A toolkit include folder whose host headers stop the compile if NVRTC ever opens them (the H200's
    toolkit has the real cublas_api.h there)."""
    folder = tmp_path / "toolkit-include"
    folder.mkdir()
    for name in ("cublas_v2.h", "cublas_api.h", "cuda.h", "cuda_runtime.h", "nccl.h", "stdint.h", "vector"):
        (folder / name).write_text(f"#error the toolkit's {name} was reached\n")
    return folder


@pytest.mark.nvrtc
@pytest.mark.parametrize("headers", ["toolkit first", "wheels only"])
def test_the_real_trees_q8_1_and_dequant_kernels_compile_with_and_without_a_toolkits_headers(
        real_tree, monkeypatch, cache, tmp_path, headers):
    _nvrtc_or_skip()
    real = kbuild.cuda_include_dirs()
    wheels = kbuild.wheel_include_dirs()
    if headers == "wheels only" and not wheels:
        pytest.skip("pip's nvidia wheels have no CUDA headers here")
    folders = [str(_poisoned_toolkit(tmp_path)), *real] if headers == "toolkit first" else wheels
    monkeypatch.setattr(kbuild, "cuda_include_dirs", lambda: folders)
    monkeypatch.setenv(build.COMPILER_ENV, "nvrtc")
    families = build_catalog(RunSpec())  # a run's own catalog: ggml's variants stay in it
    from strata_bench.ggml.variants import attach

    tree = locate(real_tree)
    attach(families, tree)
    builds = [("q8_1", QUANTIZE, ["quantize_q8_1"])]
    if headers == "toolkit first":  # convert.cu once is enough (about 5 s on 2 cores)
        builds.append(("dequant", CONVERT, ["dequantize_block_iq2_xxs<float>",
                                            "dequantize_block<32, 1, &dequantize_q8_0, float>"]))
    for name, source, exprs in builds:
        unit = f"{tree.path(source)}@ggml"
        compiled = kbuild.compile_unit(families[name], unit, exprs, "sm_90", use_cache=False)
        assert sorted(compiled.lowered) == sorted(exprs)  # each checked against its launch's parameters
        assert "-use_fast_math" in compiled.options and "-ftz=false" not in compiled.options
    if headers == "toolkit first":  # a static kernel's name expression is lowered as a template's
        assert compiled.lowered["dequantize_block_iq2_xxs<float>"] == "_Z24dequantize_block_iq2_xxsIfEvPKvPT_"
        assert "_INTERNAL_" in compiled.lowered["dequantize_block<32, 1, &dequantize_q8_0, float>"]


@pytest.mark.nvrtc
@pytest.mark.slow
def test_the_real_trees_mat_vec_instances_compile_by_name(real_tree, monkeypatch, cache):
    _nvrtc_or_skip()
    monkeypatch.setenv(build.COMPILER_ENV, "nvrtc")
    from strata_bench.ggml import mmvq

    tree = locate(real_tree)
    spec = build.source_build(tree, MMVQ, "--ggml variant 'ggml'", build_check())
    exprs = [mmvq.kernel_name(tree, "iq2_xxs", 1, False), mmvq.kernel_name(tree, "q4_k", 8, False),
             mmvq.kernel_name(tree, "q8_0", 1, True), mmvq.kernel_name(tree, "iq2_xxs", 1, True, fusion=True)]
    compiled = spec.compile("unit", exprs, "90", use_cache=False)
    assert compiled.lowered[exprs[0]].startswith("_Z13mul_mat_vec_qIL9ggml_type16ELi1ELb0ELb0ELb0EE")
    # grouped's fused gate/up instance (moe.py), its parameters the same 19 as the plain one's
    assert compiled.lowered[exprs[3]].startswith("_Z13mul_mat_vec_qIL9ggml_type16ELi1ELb1ELb1ELb0EE")


def build_check():
    from strata_bench.ggml import mmvq
    from strata_bench.ggml.launch import checker

    return checker(lambda e: mmvq.SIGNATURE, "ggml")
