"""`engine build`: the tree check, the plan (targets, architecture, cache key, CMake lines), tools, and real
CMake + ninja builds of a tiny tree on the CPU (fresh, cached, incremental in the shared workspace, failed)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli
from strata_bench.engine import plan as plan_mod
from strata_bench.engine.build import BuildFailed, first_error, run_build
from strata_bench.engine.plan import Tools, cache_key, check_arch, find_tools, make_plan
from strata_bench.engine.tree import build_files, file_digests, open_tree
from strata_bench.errors import InputError
from tests.engine.tiny_tree import TOOLS, write_tiny_tree

CMAKE, NINJA = shutil.which("cmake"), shutil.which("ninja")
needs_cmake = pytest.mark.skipif(not (CMAKE and shutil.which("cc")), reason="cmake or a C compiler is not installed")


def _fake_nvcc(folder: Path, cublas: bool = True) -> str:
    """An nvcc that only answers --version (the tiny tree compiles no CUDA), in FOLDER/bin, with cuBLAS's
    header in FOLDER/include."""
    (folder / "bin").mkdir(parents=True, exist_ok=True)
    if cublas:
        (folder / "include").mkdir(exist_ok=True)
        (folder / "include" / "cublas_v2.h").write_text("/* cuBLAS */\n")
    nvcc = folder / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    nvcc.chmod(0o755)
    return str(nvcc)


def _tools(tmp_path: Path) -> Tools:
    return Tools(CMAKE or "cmake", _fake_nvcc(tmp_path / "cuda"), NINJA, (("cmake", "cmake 3"), ("nvcc", "V13")))


def test_a_folder_that_is_not_llama_cpp_is_refused_in_one_line(tmp_path):
    with pytest.raises(InputError) as exc:
        open_tree(tmp_path / "absent")
    assert str(exc.value) == f"engine tree is not a folder: {str(tmp_path / 'absent')!r}"
    (tmp_path / "CMakeLists.txt").write_text('project("other" C)\n')
    with pytest.raises(InputError) as exc:
        open_tree(tmp_path)
    assert str(exc.value) == (f"not a llama.cpp tree (no CMakeLists.txt with project(\"llama.cpp\") and ggml/): "
                              f"{str(tmp_path)!r}")
    tree = write_tiny_tree(tmp_path / "t")
    shutil.rmtree(tree / "ggml" / "src" / "ggml-cuda")
    with pytest.raises(InputError, match=r"^llama.cpp tree without ggml/src/ggml-cuda \(no CUDA backend"):
        open_tree(tree)


def test_targets_are_the_ab_tools_with_completion_or_else_cli(tmp_path):
    assert open_tree(write_tiny_tree(tmp_path / "a")).targets() == TOOLS
    older = [t if t != "llama-completion" else "llama-cli" for t in TOOLS]
    assert open_tree(write_tiny_tree(tmp_path / "b", tools=older)).targets() == tuple(older)
    without = write_tiny_tree(tmp_path / "c", tools=[t for t in TOOLS if t != "llama-imatrix"])
    with pytest.raises(InputError) as exc:
        open_tree(without).targets()
    assert str(exc.value).startswith(f"{without.resolve()} is a llama.cpp tree without llama-imatrix (its executables: "
                                     f"llama-bench, llama-completion,")


def test_architecture_is_the_asked_one_else_the_local_gpus_else_90(monkeypatch):
    assert check_arch("90") == "90" and check_arch("90, 120a") == "90,120a" and check_arch("90a-real") == "90a-real"
    monkeypatch.setattr(plan_mod, "local_arch", lambda: None)
    assert check_arch(None) == "90"
    monkeypatch.setattr(plan_mod, "local_arch", lambda: "89")
    assert check_arch(None) == "89"
    for bad in ("sm_90", "9.0", "", "90,"):
        with pytest.raises(InputError) as exc:
            check_arch(bad)
        assert str(exc.value) == f"--arch must be CUDA architectures like 90 or 90,120a, got {bad!r}"


def test_the_plan_builds_only_the_targets_for_the_asked_arch_with_cuda_release(tmp_path):
    tree = open_tree(write_tiny_tree(tmp_path / "t"))
    tools = Tools("/bin/cmake", "/cuda/bin/nvcc", "/bin/ninja", (("nvcc", "V13.0.88"),))
    plan = make_plan(tree, "90", tools, tmp_path / "cache", jobs=16)
    work = tmp_path / "cache" / "work" / "cuda-90-ninja"
    assert plan.configure_argv() == [
        "/bin/cmake", "-S", str(work / "src"), "-B", str(work / "build"), "-G", "Ninja",
        "-DCMAKE_MAKE_PROGRAM=/bin/ninja", "-DCMAKE_BUILD_TYPE=Release", "-DGGML_CUDA=ON",
        "-DCMAKE_CUDA_ARCHITECTURES=90", "-DCMAKE_CUDA_COMPILER=/cuda/bin/nvcc", "-DGGML_NATIVE=OFF",
        "-DBUILD_SHARED_LIBS=ON", "-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF",
        "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_BUILD_TESTS=OFF",
        "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined"]
    assert plan.build_argv() == ["/bin/cmake", "--build", str(work / "build"), "--config", "Release", "-j", "16",
                                 "--target", *TOOLS]
    assert plan.bin_dir == tmp_path / "cache" / plan.key / "bin" and not plan.cached
    make = make_plan(tree, "90,100", Tools("/bin/cmake", "/cuda/bin/nvcc", None), tmp_path / "cache")
    assert make.configure_argv()[5:7] == ["-G", "Unix Makefiles"] and "-DCMAKE_CUDA_ARCHITECTURES=90;100" in \
        make.configure_argv() and make.slot.name == "cuda-90_100-make"


def test_the_cache_key_follows_build_content_only(tmp_path):
    tools = Tools("cmake", "nvcc", "ninja", (("nvcc", "V13.0.88"),))
    tree = write_tiny_tree(tmp_path / "a")
    key = cache_key(file_digests(tree), "90", TOOLS, tools)
    copy = tmp_path / "b"
    shutil.copytree(tree, copy)  # new timestamps, same content
    os.utime(copy / "ggml" / "src" / "ggml.c", (1, 1))
    (copy / "docs" / "build.md").write_text("docs change no build\n")
    (copy / ".git").mkdir()
    (copy / ".git" / "HEAD").write_text("ref: x\n")
    (copy / "build-cuda").mkdir()
    (copy / "build-cuda" / "CMakeCache.txt").write_text("old build\n")
    assert cache_key(file_digests(copy), "90", TOOLS, tools) == key
    assert "docs/build.md" not in {p.as_posix() for p in build_files(copy)}
    (copy / "ggml" / "src" / "ggml.c").write_text("int ggml_answer(void) { return 2; }\n")
    assert cache_key(file_digests(copy), "90", TOOLS, tools) != key
    assert cache_key(file_digests(tree), "100", TOOLS, tools) != key
    assert cache_key(file_digests(tree), "90", TOOLS, Tools("cmake", "nvcc", "ninja", (("nvcc", "V12.9"),))) != key
    assert plan_mod.cache_root({"STRATA_CACHE_DIR": "/x"}) == Path("/x/engines")
    assert plan_mod.cache_root({"HOME": "/h"}) == Path.home() / ".cache" / "strata-bench" / "engines"


def test_missing_cmake_or_nvcc_is_one_line(tmp_path):
    with pytest.raises(InputError) as exc:
        find_tools({"PATH": str(tmp_path)})
    assert str(exc.value) == "cmake not found on PATH: install CMake 3.18 or later (pip install cmake works)"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cmake").symlink_to(CMAKE or "/bin/true")
    plan_mod_homes = plan_mod.CUDA_HOMES
    try:
        plan_mod.CUDA_HOMES = ()
        with pytest.raises(InputError) as exc:
            find_tools({"PATH": str(bin_dir), "CUDA_PATH": str(tmp_path / "no-cuda")})
    finally:
        plan_mod.CUDA_HOMES = plan_mod_homes
    assert str(exc.value) == ("nvcc not found (looked in $CUDACXX, PATH, $CUDA_PATH/bin, /usr/local/cuda/bin): "
                              "install the CUDA toolkit or set CUDACXX")
    without = _fake_nvcc(tmp_path / "bare", cublas=False)
    with pytest.raises(InputError) as exc:
        find_tools({"PATH": str(bin_dir), "CUDACXX": without})
    assert str(exc.value) == (f"the CUDA toolkit at {tmp_path / 'bare'} has no cuBLAS (include/cublas_v2.h), which "
                              f"GGML_CUDA links: install its cuBLAS, or set CUDACXX to a toolkit that has it")
    tools = find_tools({"PATH": str(bin_dir), "CUDACXX": _fake_nvcc(tmp_path / "cuda")})
    assert tools.nvcc == str(tmp_path / "cuda" / "bin" / "nvcc") and tools.ninja is None
    assert dict(tools.versions)["nvcc"] == "Cuda compilation tools, release 13.0, V13.0.88"


def test_first_error_names_the_file_for_nvcc_gcc_and_cmake():
    nvcc = ["[12/340] Building CUDA object ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/mmvq.cu.o",
            "FAILED: ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/mmvq.cu.o",
            "/w/src/ggml/src/ggml-cuda/mmvq.cu(212): error: identifier \"sumi\" is undefined",
            "/w/src/ggml/src/ggml-cuda/mmvq.cu(230): error: expected a \";\"", "2 errors detected"]
    got = first_error(nvcc)
    assert (got.file, got.line, got.text) == ("/w/src/ggml/src/ggml-cuda/mmvq.cu", 212,
                                              '/w/src/ggml/src/ggml-cuda/mmvq.cu(212): error: identifier "sumi" '
                                              'is undefined')
    gcc = ["In file included from /w/src/common/common.cpp:1:", "/w/src/common/log.h:7:3: error: 'x' was not declared"]
    assert first_error(gcc).file == "/w/src/common/log.h" and first_error(gcc).line == 7
    cmake = ["-- The C compiler identification is GNU 12.2.0", "CMake Error at ggml/CMakeLists.txt:3 (message):",
             "  GGML_CUDA needs CUDA 11.7", ""]
    assert first_error(cmake).text == "CMake Error at ggml/CMakeLists.txt:3 (message): GGML_CUDA needs CUDA 11.7"
    assert first_error(["collect2: error: ld returned 1 exit status"]).file is None
    assert first_error(["all good"]) is None


@needs_cmake
def test_fresh_cached_and_one_file_builds_in_the_shared_workspace(tmp_path):
    cache = tmp_path / "cache"
    tools = _tools(tmp_path)
    tree_a = write_tiny_tree(tmp_path / "a", answer=1)
    plan_a = make_plan(open_tree(tree_a), "90", tools, cache, jobs=2)
    a = run_build(plan_a)
    assert not a.cached and a.files_copied == len(file_digests(tree_a)) and sorted(os.listdir(a.bin)) == sorted(
        list(TOOLS) + ["libggml.so"])
    assert _answer(a.bin) == "llama-bench answer 1\n"
    # A copy of A (new timestamps, same content): the same key, nothing runs.
    copy = tmp_path / "a-copy"
    shutil.copytree(tree_a, copy)
    again = run_build(make_plan(open_tree(copy), "90", tools, cache, jobs=2))
    assert again.cached and again.key == a.key and again.bin == a.bin
    # B differs from A in one tool's source: only that object and its link run.
    tree_b = tmp_path / "b"
    shutil.copytree(tree_a, tree_b)
    main = tree_b / "tools" / "bench" / "main.c"
    main.write_text(main.read_text().replace("answer %d", "answer(b) %d"))
    os.utime(main, (1, 1))  # older than every object: content decides, not the timestamp
    b = run_build(make_plan(open_tree(tree_b), "90", tools, cache, jobs=2))
    assert (b.files_copied, b.cached, b.key != a.key) == (1, False, True)
    if NINJA:
        assert b.steps == 2  # compile main.c, link llama-bench
    assert _answer(b.bin) == "llama-bench answer(b) 1\n"
    # C changes the library: A's executables still load A's library from A's own bin ($ORIGIN).
    tree_c = write_tiny_tree(tmp_path / "c", answer=2)
    c = run_build(make_plan(open_tree(tree_c), "90", tools, cache, jobs=2))
    assert c.files_copied == 2 and (c.steps < a.steps if NINJA else True)  # ggml.c and bench/main.c back to A's
    assert (_answer(c.bin), _answer(a.bin), _answer(b.bin)) == ("llama-bench answer 2\n", "llama-bench answer 1\n",
                                                                "llama-bench answer(b) 1\n")


@needs_cmake
def test_a_failed_build_names_the_first_error_and_caches_nothing(tmp_path):
    tree = write_tiny_tree(tmp_path / "t")
    (tree / "tools" / "quantize" / "main.c").write_text("int main(void) { return undefined_name; }\n")
    plan = make_plan(open_tree(tree), "90", _tools(tmp_path), tmp_path / "cache", jobs=2)
    with pytest.raises(BuildFailed) as exc:
        run_build(plan)
    text = str(exc.value)
    assert text.startswith(f"engine build failed: {plan.slot / 'src' / 'tools' / 'quantize' / 'main.c'}:1:")
    assert "error: " in text and "undefined_name" in text and text.endswith(f"(log: {plan.slot / 'build.log'})")
    assert not plan.cached and not plan.bin_dir.exists()


def _answer(bin_dir: str) -> str:
    return subprocess.run([os.path.join(bin_dir, "llama-bench")], capture_output=True, text=True, check=True,
                          env={"PATH": "/usr/bin:/bin"}).stdout


def _cli(*args, env=None):
    return CliRunner().invoke(cli, ["engine", *args], env=env)


def test_cli_bad_trees_and_missing_tools_exit_2_in_one_line(tmp_path):
    got = _cli("build", str(tmp_path))
    assert (got.exit_code, got.output) == (2, f"not a llama.cpp tree (no CMakeLists.txt with project(\"llama.cpp\") "
                                              f"and ggml/): {str(tmp_path)!r}\n")
    tree = write_tiny_tree(tmp_path / "t")
    got = _cli("build", str(tree), "--arch", "sm90")
    assert (got.exit_code, got.output) == (2, "--arch must be CUDA architectures like 90 or 90,120a, got 'sm90'\n")
    got = _cli("build", str(tree), env={"PATH": str(tmp_path / "empty")})
    assert (got.exit_code, got.output) == (2, "cmake not found on PATH: install CMake 3.18 or later "
                                              "(pip install cmake works)\n")


@needs_cmake
def test_cli_dry_run_then_build_prints_the_bin_folder_then_a_cache_hit(tmp_path):
    tree = write_tiny_tree(tmp_path / "t")
    env = {"STRATA_CACHE_DIR": str(tmp_path / "cache"), "CUDACXX": _fake_nvcc(tmp_path / "cuda")}
    dry = _cli("build", str(tree), "--arch", "90", "--dry-run", env=env)
    assert dry.exit_code == 0 and "targets: " + " ".join(TOOLS) in dry.output and "cached: False" in dry.output
    assert not (tmp_path / "cache").exists()
    built = CliRunner().invoke(cli, ["engine", "build", str(tree), "--arch", "90", "-j", "2"], env=env)
    assert built.exit_code == 0, built.output + built.stderr
    bin_dir = built.stdout.strip()
    assert bin_dir.startswith(str(tmp_path / "cache" / "engines")) and bin_dir.endswith("/bin")
    assert built.stderr.startswith("engine ") and "built in" in built.stderr
    hit = CliRunner().invoke(cli, ["engine", "build", str(tree), "--arch", "90"], env=env)
    assert (hit.exit_code, hit.stdout.strip()) == (0, bin_dir) and "(cached)" in hit.stderr


def test_pack_holds_exactly_the_build_files_and_unpacks_to_the_same_key(tmp_path):
    import tarfile

    tree = write_tiny_tree(tmp_path / "t")
    got = _cli("pack", str(tree), str(tmp_path / "src.tgz"))
    size = (tmp_path / "src.tgz").stat().st_size
    assert (got.exit_code, got.output) == (0, f"{tmp_path / 'src.tgz'}: 18 files, {size / 1e6:.1f} MB\n")
    with tarfile.open(tmp_path / "src.tgz") as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    assert file_digests(open_tree(tmp_path / "unpacked").root) == file_digests(tree)
    bad = _cli("pack", str(tree), str(tmp_path / "absent" / "src.tgz"))
    assert (bad.exit_code, bad.output) == (2, f"cannot write {tmp_path / 'absent' / 'src.tgz'}: "
                                              f"{tmp_path / 'absent'} is not a folder\n")
