"""The ctypes NVRTC binding: version, supported architectures, a compile with a lowered name, a compile
error's log, and the one-line reason when no library loads (no CuPy involved anywhere)."""
from __future__ import annotations

import pytest

from strata_bench.kernels import nvrtc

SOURCE = 'template <int N> __global__ void k(float* o) { o[threadIdx.x] = N; }\n'


@pytest.mark.nvrtc
def test_version_and_supported_archs():
    major, minor = nvrtc.version()
    assert major >= 12 and minor >= 0
    archs = nvrtc.supported_archs()
    assert 90 in archs and 91 not in archs and list(archs) == sorted(archs)


@pytest.mark.nvrtc
def test_compile_returns_cubin_lowered_names_and_ptxas_log():
    cubin, lowered, log = nvrtc.compile_program(SOURCE, "k.cu", ["k<3>"], ["--gpu-architecture=sm_90",
                                                                         "-Xptxas=-v"])
    assert cubin[:4] == b"\x7fELF"
    assert lowered == {"k<3>": "_Z1kILi3EEvPf"}
    assert "Used " in log and "registers" in log


@pytest.mark.nvrtc
def test_compile_error_carries_the_log_with_file_and_line():
    with pytest.raises(nvrtc.NvrtcError, match="NVRTC_ERROR_COMPILATION") as info:
        nvrtc.compile_program("__global__ void k() { nope(); }\n", "bad.cu", [], ["--gpu-architecture=sm_90"])
    assert 'bad.cu(1): error: identifier "nope" is undefined' in info.value.log


def test_no_library_is_one_typed_line(monkeypatch):
    monkeypatch.setattr(nvrtc, "_candidates", lambda: ["/nonexistent/libnvrtc.so.13"])
    nvrtc.library.cache_clear()
    try:
        with pytest.raises(nvrtc.NvrtcUnavailable) as info:
            nvrtc.version()
    finally:
        nvrtc.library.cache_clear()
    text = str(info.value)
    assert text.startswith("NVRTC is not loadable (/nonexistent/libnvrtc.so.13: ")
    assert text.endswith("install '.[dev]', '.[cuda13]' or '.[cuda12]'") and "\n" not in text
