"""kernels/nvcc.py: nvcc builds a cubin per architecture, records its command and version, caches the
result whole (nothing half-written on a failure), and says in one line where nvcc is missing."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from strata_bench.errors import CompileError
from strata_bench.kernels import cubin, nvcc

DATA = Path(__file__).parent / "data"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                                reason="nvcc is not installed on this host")


@pytest.fixture(autouse=True)
def no_toolkit_env(monkeypatch):
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_builds_a_cubin_per_arch_and_caches_it(tmp_path, arch):
    built = nvcc.compile_cubin(DATA / "params.cu", arch, ("-std=c++17",), tmp_path)
    assert cubin.read_elf(built.cubin).arch == int(arch[3:]) and not built.cache_hit
    assert built.command[1:] == ("-cubin", f"-arch={arch}", "-std=c++17", "-Xptxas=-v", "-o", "<cubin>",
                                 str(DATA / "params.cu"))
    assert built.version.startswith("Cuda compilation tools, release ") and "; Build cuda_" in built.version
    assert "Compiling entry function" in built.log  # ptxas -v: the resources table reads it
    again = nvcc.compile_cubin(DATA / "params.cu", arch, ("-std=c++17",), tmp_path)
    assert again.cache_hit and again.cubin == built.cubin and again.command == built.command
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".cubin", ".json"]


@needs_nvcc
def test_options_are_part_of_the_key(tmp_path):
    a = nvcc.compile_cubin(DATA / "params.cu", "sm_90", (), tmp_path)
    b = nvcc.compile_cubin(DATA / "params.cu", "sm_90", ("-DUNUSED=1",), tmp_path)
    assert not b.cache_hit and len(list(tmp_path.glob("*.cubin"))) == 2 and a.command != b.command


@needs_nvcc
def test_a_compile_error_shows_nvccs_first_lines_and_writes_nothing(tmp_path):
    bad = tmp_path / "bad.cu"
    bad.write_text("__global__ void k(int* p) { p[0] = undefined_name; }\n")
    cache = tmp_path / "cache"
    with pytest.raises(CompileError) as err:
        nvcc.compile_cubin(bad, "sm_90", (), cache, label="v.toml: variant 'x'")
    lines = str(err.value).splitlines()
    assert lines[0].startswith("nvcc failed: v.toml: variant 'x' for sm_90 (exit ")
    assert any("bad.cu(1): error: identifier \"undefined_name\" is undefined" in ln for ln in lines[1:])
    assert len(lines) <= 1 + nvcc.ERROR_LINES and not cache.exists()


def test_missing_nvcc_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_PATH", str(tmp_path))
    with pytest.raises(nvcc.NvccMissing) as err:
        nvcc.compile_cubin(DATA / "params.cu", "sm_90", (), tmp_path / "cache")
    assert str(err.value) == (f"nvcc not found (looked in {tmp_path}/bin/nvcc; set CUDA_PATH to a CUDA toolkit)")
    assert err.value.exit_code == 2 and not (tmp_path / "cache").exists()


def test_cache_key_follows_source_options_version_arch_and_inputs(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text("// a\n")
    base = nvcc.nvcc_cache_key(src, ["-O3"], "v1", "sm_90", "h")
    assert base.startswith("nvcc-") and base == nvcc.nvcc_cache_key(src, ["-O3"], "v1", "sm_90", "h")
    key = nvcc.nvcc_cache_key
    others = {key(src, ["-O2"], "v1", "sm_90", "h"), key(src, ["-O3"], "v2", "sm_90", "h"),
              key(src, ["-O3"], "v1", "sm_80", "h"), key(src, ["-O3"], "v1", "sm_90", "g")}
    src.write_text("// b\n")
    others.add(nvcc.nvcc_cache_key(src, ["-O3"], "v1", "sm_90", "h"))
    assert base not in others and len(others) == 5


@pytest.mark.parametrize("arch,hit", [("sm_90", False), ("sm_80", True)])
def test_a_cache_entry_of_another_architecture_is_built_again(tmp_path, arch, hit):
    sm80 = cubin.elf_for_arch((DATA / "params.fatbin").read_bytes(), 80, "params.fatbin")
    nvcc._store(tmp_path, "key", nvcc.NvccOutput(sm80, ("nvcc",), "v", ""))
    loaded = nvcc._load(tmp_path, "key", arch)
    assert (loaded is not None and loaded.cache_hit) is hit
