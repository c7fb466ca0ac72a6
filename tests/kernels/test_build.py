"""Toolkit-header detection and NVRTC's architecture list: a host without a CUDA toolkit (CUDA_PATH at
an empty folder) skips the wmma sources with the reason and compiles every other one."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli
from strata_bench.errors import InputError
from strata_bench.kernels import build, cubin, jobs
from strata_bench.kernels.sources import kernels_dir

DATA = Path(__file__).parent / "data"
SM90_CUBIN = (DATA / "params_sm90.cubin").read_bytes()
SM80_CUBIN = cubin.elf_for_arch((DATA / "params.fatbin").read_bytes(), 80, "params.fatbin")


@pytest.fixture
def no_toolkit(tmp_path, monkeypatch):
    """A host whose only CUDA headers are pip's wheels: CUDA_PATH names an empty folder."""
    empty = tmp_path / "cuda"
    (empty / "include").mkdir(parents=True)
    monkeypatch.setenv("CUDA_PATH", str(empty))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    return empty


def test_toolkit_roots_prefer_named_ones(monkeypatch):
    monkeypatch.setenv("CUDA_PATH", "/opt/a")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    assert build.toolkit_roots() == ["/opt/a"]
    monkeypatch.delenv("CUDA_PATH")
    assert build.toolkit_roots() == ["/usr/local/cuda"]


def test_system_includes_follow_quoted_includes():
    found = build.system_includes(kernels_dir() / "pfgemm" / "pfgemm_new.cu", [kernels_dir()])
    assert {"mma.h", "cuda_fp16.h"} <= found
    assert "mma.h" not in build.system_includes(kernels_dir() / "dequant" / "dequant.cu", [kernels_dir()])


@pytest.fixture
def wheel_headers(tmp_path, monkeypatch):
    """pip's nvidia headers as the cudart wheel ships them (cuda_fp16.h and mma.h, no crt/mma.h), in a
    folder of the test's own; `wheel_headers(False)` makes a host without them."""
    include = tmp_path / "wheel" / "include"
    include.mkdir(parents=True)
    (include / "cuda_fp16.h").write_text("")
    (include / "mma.h").write_text("")

    def use(present=True):
        monkeypatch.setattr(build, "wheel_include_dirs", lambda: [str(include)] if present else [])
        return include

    return use


def test_missing_headers_named_without_a_toolkit(no_toolkit, wheel_headers):
    wheel_headers()
    assert build.missing_toolkit_headers(kernels_dir() / "pfgemm" / "pfgemm_old.cu") == ["crt/mma.h"]
    assert build.missing_toolkit_headers(kernels_dir() / "q2warp" / "q2warp.cu") == []
    with pytest.raises(build.ToolkitHeadersMissing, match=r"^pfgemm/pfgemm_old.cu needs the CUDA toolkit's "):
        build.compile_source("pfgemm/pfgemm_old.cu", ["x"], "sm_90")


def test_without_pip_headers_cuda_fp16_is_missing_too(no_toolkit, wheel_headers):
    wheel_headers(present=False)
    assert build.missing_toolkit_headers(kernels_dir() / "pfgemm" / "pfgemm_old.cu") == [
        "cuda_fp16.h", "mma.h", "crt/mma.h"]
    assert build.missing_toolkit_headers(kernels_dir() / "q2warp" / "q2warp.cu") == ["cuda_fp16.h"]


@pytest.mark.nvrtc
def test_compile_cli_skips_wmma_sources_and_builds_the_rest(no_toolkit, cubin_cache):
    if not build.wheel_include_dirs():
        pytest.skip("pip's nvidia headers are not installed (cuda_fp16.h would be missing too)")
    result = CliRunner().invoke(cli, ["compile", "--arch", "90", "--family", "pfgemm,q2warp"])
    assert result.exit_code == 0, result.output
    assert "3 compile(s): 1 ok (0 cached), 0 failed, 2 skipped" in result.stdout
    skipped = [line for line in result.stdout.splitlines() if line.startswith("skipped: ")]
    assert skipped == [f"skipped: pfgemm/{name}.cu needs the CUDA toolkit's crt/mma.h (not found under "
                       f"{no_toolkit} or pip's nvidia headers)" for name in ("pfgemm_old", "pfgemm_new")]


@pytest.mark.nvrtc
def test_unsupported_arch_is_one_line_before_compiling(cubin_cache):
    result = CliRunner().invoke(cli, ["compile", "--arch", "90,91"])
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("architecture sm_91 is not supported by NVRTC ")
    assert "90" in lines[0] and not list(cubin_cache.glob("*")) if cubin_cache.exists() else True


@pytest.mark.nvrtc
def test_parse_archs_checks_the_supported_list():
    assert jobs.parse_archs(["90"]) == ["sm_90"]
    with pytest.raises(InputError, match="sm_70 is not supported"):
        jobs.parse_archs(["70"])


def test_kernels_keep_the_first_source_and_look_up_by_source(monkeypatch):
    # A TOML variant's source (appended last) that re-declares a built-in name does not replace the
    # built-in's kernel; the variant finds its own through in_source.
    import sys
    import types

    class Module:
        def load(self, cubin):
            self.cubin = cubin

        def get_function(self, symbol):
            return (self.cubin, symbol)

    function = types.SimpleNamespace(Module=Module)
    cuda = types.SimpleNamespace(function=function)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)

    def compiled(source, cubin, names):
        return build.CompiledSource(source, "sm_90", (), cubin, {n: f"_Z{n}" for n in names}, "")

    kernels = build.Kernels([compiled("mmvq/mmvq.cu", b"builtin", ["k<1>", "only_builtin"]),
                             compiled("/my/k.cu", b"mine", ["k<1>", "only_mine"])])
    assert kernels.get("k<1>") == (b"builtin", "_Zk<1>")
    assert kernels.in_source("/my/k.cu", "k<1>") == (b"mine", "_Zk<1>")
    assert kernels.get("only_mine") == (b"mine", "_Zonly_mine")
    with pytest.raises(InputError, match=r"^kernel 'only_builtin' was not compiled from /my/k.cu$"):
        kernels.in_source("/my/k.cu", "only_builtin")


@pytest.mark.nvrtc
def test_an_edit_in_a_family_include_dir_is_a_new_compile(tmp_path, cubin_cache):
    # Issue 23: a folder a family adds with -I (outside kernels_src and its kernels_root) is read by the
    # compile, so an edit there must miss the cache; the cache still serves the unchanged compile.
    root, include = tmp_path / "kernels", tmp_path / "include"
    root.mkdir()
    include.mkdir()
    (root / "k.cu").write_text('#include "scale.cuh"\nextern "C" __global__ void k(int *p) { p[0] = SCALE; }\n')
    header = include / "scale.cuh"
    header.write_text("#define SCALE 3\n")

    def compile_k():
        return build.compile_source("k.cu", ["k"], "sm_90", (f"-I{include}",), root=root)

    first = compile_k()
    header.write_text("#define SCALE 5\n")
    second, third = compile_k(), compile_k()
    assert (first.cache_hit, second.cache_hit, third.cache_hit) == (False, False, True)
    assert first.cubin != second.cubin and third.cubin == second.cubin


def test_a_cache_entry_cut_short_is_never_served(cubin_cache, monkeypatch):
    # The metadata (with the cubin's sha256) is written last, each file under a temporary name of its own:
    # a crash between the two, or a torn cubin, leaves an entry the loader rebuilds, and no .tmp behind.
    compiled = build.CompiledSource("k.cu", "sm_90", (), SM90_CUBIN, {"k": "k"}, "")
    real_replace = build.os.replace

    def crash_on_metadata(src, dst):
        if str(dst).endswith(".json"):
            raise OSError("disk full")
        real_replace(src, dst)

    monkeypatch.setattr(build.os, "replace", crash_on_metadata)
    with pytest.raises(OSError, match="disk full"):
        build._cache_store("key", compiled)
    assert sorted(p.name for p in cubin_cache.iterdir()) == ["key.cubin"]
    assert build._cache_load("key", "k.cu", "sm_90", ()) is None
    monkeypatch.setattr(build.os, "replace", real_replace)
    build._cache_store("key", compiled)
    assert build._cache_load("key", "k.cu", "sm_90", ()).cache_hit
    (cubin_cache / "key.cubin").write_bytes(b"cub")  # torn
    assert build._cache_load("key", "k.cu", "sm_90", ()) is None


def test_a_cache_entry_of_another_architecture_is_built_again(cubin_cache):
    # An entry whose cubin is not for the key's architecture (a flag that overrode it, a copied cache) would
    # load, and fault or run other code, on the GPU asked for.
    build._cache_store("key", build.CompiledSource("k.cu", "sm_90", (), SM80_CUBIN, {"k": "k"}, ""))
    assert build._cache_load("key", "k.cu", "sm_90", ()) is None
    assert build._cache_load("key", "k.cu", "sm_80", ()).cache_hit


@pytest.mark.parametrize("extra,dropped", [
    ((), ()),
    (("-use_fast_math",), ("-ftz=false", "-prec-div=true", "-prec-sqrt=true", "-fmad=true")),
    (("--use_fast_math", "-prec-div=true"), ("-ftz=false", "-prec-div=true", "-prec-sqrt=true", "-fmad=true")),
    (("-ftz=true",), ("-ftz=false",)),
    (("--prec-sqrt=false", "-fmad=false"), ("-prec-sqrt=true", "-fmad=true")),
])
def test_a_variants_float_options_replace_the_base_ones(extra, dropped):
    assert build.base_options(extra) == tuple(o for o in build.BASE_OPTIONS if o not in dropped)
    opts = build.compile_options("sm_90", extra)
    assert opts[-len(extra):] == extra if extra else True
    assert not set(dropped) & set(opts[:len(opts) - len(extra)])


@pytest.mark.nvrtc
def test_fast_math_changes_the_code_nvrtc_builds(tmp_path, cubin_cache):
    # Before: an appended -use_fast_math was beaten by the base -prec-div=true -ftz=false (same cubin).
    (tmp_path / "div.cu").write_text("__global__ void div(float* y, const float* a, const float* b) "
                                     "{ y[threadIdx.x] = a[threadIdx.x] / b[threadIdx.x]; }\n")
    src = str(tmp_path / "div.cu")
    ieee = build.compile_source(src, ["div"], "sm_90", ())
    fast = build.compile_source(src, ["div"], "sm_90", ("-use_fast_math",))
    ftz_only = build.compile_source(src, ["div"], "sm_90", ("-ftz=true",))
    assert len({ieee.cubin, fast.cubin, ftz_only.cubin}) == 3
    assert "-use_fast_math" in fast.options and "-prec-div=true" not in fast.options
