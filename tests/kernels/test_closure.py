"""The include closure of a source and the cache key over it: exact file lists on a small tree."""
from __future__ import annotations

from pathlib import Path

import pytest

from strata_bench.kernels import build, closure
from strata_bench.kernels.sources import kernels_dir


@pytest.fixture
def tree(tmp_path):
    """kernels/main.cu with nested quoted includes, an -I folder (include/) and a toolkit folder (cuda/)."""
    files = {
        "kernels/main.cu": '#include "common/a.cuh"\n#include <extra.cuh>\n#include <cuda_fp16.h>\n'
                           '#include <stdint.h>\n#if 0\n#include "never.cuh"\n#endif\n#include "gone.cuh"\n',
        "kernels/common/a.cuh": '#pragma once\n#include "b.cuh"  // beside a.cuh, before the -I folders\n',
        "kernels/common/b.cuh": "#define B 1\n",
        "kernels/b.cuh": "#define B 2\n",
        "kernels/never.cuh": "",
        "kernels/unused.cuh": "#define UNUSED 1\n",
        "include/extra.cuh": '#include "common/a.cuh"\n#define EXTRA 3\n',
        "cuda/cuda_fp16.h": '#include "cuda_fp16.hpp"\n',
        "cuda/cuda_fp16.hpp": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def options(tree: Path) -> tuple[str, ...]:
    return ("--gpu-architecture=sm_90", f"-I{tree / 'kernels'}", f"-I{tree / 'cuda'}", "-I", str(tree / "include"))


def scan(tree: Path, opts=None) -> closure.SourceClosure:
    return closure.scan(tree / "kernels" / "main.cu", options(tree) if opts is None else opts, [tree / "cuda"])


def names(found: closure.SourceClosure, tree: Path) -> list[str]:
    return [f.path.relative_to(tree).as_posix() for f in found.files]


def test_closure_follows_nested_includes_through_the_include_path(tree):
    found = scan(tree)
    # never.cuh is under #if 0: a scan takes it (a superset is safe for a key); unused.cuh is not included.
    assert names(found, tree) == ["include/extra.cuh", "kernels/common/a.cuh", "kernels/common/b.cuh",
                                  "kernels/main.cu", "kernels/never.cuh"]
    assert found.system == (closure.SystemHeader("cuda_fp16.h", tree / "cuda" / "cuda_fp16.h",
                                                 closure._sha256(tree / "cuda" / "cuda_fp16.h")),
                            closure.SystemHeader("stdint.h"))
    assert found.missing == ("gone.cuh",)


def test_include_dirs_in_option_order():
    assert closure.include_dirs(["-I/a", "-DX=1", "-I", "/b", "--include-path=/c", "--include-path", "/d", "-I/a"]) \
        == [Path("/a"), Path("/b"), Path("/c"), Path("/d")]


def test_the_including_folder_then_the_first_folder_on_the_path_wins(tree):
    (tree / "kernels" / "common" / "b.cuh").unlink()
    assert "kernels/b.cuh" in names(scan(tree), tree)  # a.cuh's "b.cuh": not beside it, so from -I kernels
    (tree / "include" / "common").mkdir()
    (tree / "include" / "common" / "a.cuh").write_text("")
    # main.cu's "common/a.cuh" is beside main.cu; extra.cuh's is beside extra.cuh.
    assert names(scan(tree), tree) == ["include/common/a.cuh", "include/extra.cuh", "kernels/b.cuh",
                                       "kernels/common/a.cuh", "kernels/main.cu", "kernels/never.cuh"]
    # <extra.cuh> in two -I folders: the one the options name first.
    (tree / "kernels" / "extra.cuh").write_text("")
    assert names(scan(tree), tree) == ["kernels/b.cuh", "kernels/common/a.cuh", "kernels/extra.cuh",
                                       "kernels/main.cu", "kernels/never.cuh"]


def test_a_computed_include_takes_every_source_of_the_path(tree):
    (tree / "kernels" / "main.cu").write_text("#define H <extra.cuh>\n#include H\n")
    assert names(scan(tree), tree) == ["include/extra.cuh", "kernels/b.cuh", "kernels/common/a.cuh",
                                       "kernels/common/b.cuh", "kernels/main.cu", "kernels/never.cuh",
                                       "kernels/unused.cuh"]


def test_pre_included_headers_are_read(tree):
    opts = (*options(tree), "--pre-include=unused.cuh")
    assert "kernels/unused.cuh" in names(scan(tree, opts), tree)


def key(tree: Path, opts=None, compiler: str = "nvrtc 13.0", exprs=("k",)) -> str:
    opts = options(tree) if opts is None else opts
    return closure.cache_key(scan(tree, opts), opts, compiler, exprs)


def test_key_changes_when_a_header_in_an_include_folder_changes(tree):
    before = key(tree)
    (tree / "kernels" / "unused.cuh").write_text("#define UNUSED 2\n")
    assert key(tree) == before  # not read by the compile
    (tree / "include" / "extra.cuh").write_text('#include "common/a.cuh"\n#define EXTRA 4\n')
    assert key(tree) != before


def test_key_covers_options_compiler_names_and_toolkit_headers(tree):
    before = key(tree)
    assert key(tree, (*options(tree), "-DX=1")) != before
    assert key(tree, compiler="nvrtc 13.1") != before
    assert key(tree, exprs=("k", "j")) != before
    (tree / "cuda" / "cuda_fp16.h").write_text("// another toolkit\n")
    assert key(tree) != before


def test_builtin_sources_reach_their_headers_not_the_toolkits():
    path = kernels_dir() / "pfgemm" / "pfgemm_new.cu"
    found = closure.scan(path, build.compile_options("sm_90"), build.cuda_include_dirs())
    shown = [f.path.relative_to(kernels_dir()).as_posix() for f in found.files]
    assert "pfgemm/pfgemm_new.cu" in shown and "pfgemm/pf_common.cuh" in shown
    assert all(f.path.is_relative_to(kernels_dir()) for f in found.files)
    assert {"mma.h", "cuda_fp16.h"} <= {h.name for h in found.system}
