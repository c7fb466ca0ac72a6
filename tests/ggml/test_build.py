"""ggml/build.py: the nvcc build of a ggml source, and where cuBLAS's headers come from."""
from __future__ import annotations

from pathlib import Path

import pytest

from strata_bench.errors import InputError
from strata_bench.ggml import build
from strata_bench.ggml.tree import MMVQ
from strata_bench.kernels import nvcc


def _toolkit(tmp_path: Path, with_cublas: bool) -> Path:
    root = tmp_path / "cuda"
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "bin" / "nvcc").write_text("#!/bin/sh\n")
    (root / "bin" / "nvcc").chmod(0o755)
    if with_cublas:
        (root / "include" / "cublas_v2.h").write_text("// toolkit\n")
    return root


def test_the_options_are_ggml_flags_and_the_trees_folders_and_cublas_comes_late(fake_tree, monkeypatch, tmp_path):
    from strata_bench.ggml.tree import locate

    tree = locate(fake_tree)
    root = _toolkit(tmp_path, with_cublas=True)
    monkeypatch.setattr(nvcc, "find_nvcc", lambda: str(root / "bin" / "nvcc"))
    spec = build.source_build(tree, MMVQ, "--ggml variant 'ggml'")
    assert spec.compiler == "nvcc" and spec.path == tree.path(MMVQ)
    assert spec.options == (*build.FLAGS, f"-I{tree.root}/include", f"-I{tree.root}/src", f"-I{tree.root}/src/ggml-cuda")
    assert spec.build_options() == spec.options  # the toolkit has cuBLAS: nothing more
    assert dict(spec.origin) == {"ggml_tree": str(tree.root), "ggml_version": tree.version,
                                 "ggml_sha256": tree.content_hash}


def test_without_cublas_anywhere_the_build_not_the_listing_is_refused_in_one_line(monkeypatch, tmp_path):
    root = _toolkit(tmp_path, with_cublas=False)
    monkeypatch.setattr(nvcc, "find_nvcc", lambda: str(root / "bin" / "nvcc"))
    monkeypatch.setattr(build, "_wheel_include", lambda: None)
    with pytest.raises(InputError) as err:
        build.cublas_options()
    assert str(err.value) == (f"--ggml: the CUDA toolkit at {root} has no cublas_v2.h, which ggml-cuda's headers "
                              f"include; install the toolkit's cuBLAS headers or `pip install nvidia-cublas`")


def test_the_wheels_cublas_headers_are_copied_alone(monkeypatch, tmp_path):
    root = _toolkit(tmp_path, with_cublas=False)
    wheel = tmp_path / "wheel" / "include"
    wheel.mkdir(parents=True)
    for name in ("cublas_v2.h", "cublas_api.h", "cuda_runtime.h", "cuda_fp16.h"):
        (wheel / name).write_text(f"// {name}\n")
    monkeypatch.setattr(nvcc, "find_nvcc", lambda: str(root / "bin" / "nvcc"))
    monkeypatch.setattr(build, "_wheel_include", lambda: wheel)
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path / "cache"))
    (option,) = build.cublas_options()
    folder = Path(option.removeprefix("-I"))
    assert sorted(p.name for p in folder.iterdir()) == ["cublas_api.h", "cublas_v2.h"]  # no runtime header
    assert (folder / "cublas_v2.h").read_text() == "// cublas_v2.h\n"
    assert build.cublas_options() == (option,)  # the same folder again
