"""ggml trees for tests (no ggml file is committed to this repository): `write_fake_tree` writes a small
one in ggml's layout (the three kernels with exactly the parameter lists tree.SIGNATURES names, the to-FP16
kernels fp16deq's variant launches, the fusion struct, GLU enum and SiLU grouped's variant rests on, the
fusion families' kernels, mul_mat_q and mmid.cu's helper, a few types);
`pinned_sdist_tree` extracts the real one of the pinned llama-cpp-python sdist into a cache
outside the checkout (STRATA_GGML_SDIST_CACHE, else ~/.cache/strata-bench/ggml-sdist), downloading it
only when absent; tests/ggml/conftest.py makes fixtures of both."""
from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
from pathlib import Path

from strata_bench.ggml import combine, glu, mmid, mmq, mmq_dots, moe, to_fp16
from strata_bench.ggml.tree import CONVERT, MMVQ, QUANTIZE, SIGNATURES

# The fake tree's types: format -> (ggml name, type id, QR, VDR); iq4_xs has a type id and nothing else,
# so it is not among the tree's formats.
FAKE_TYPES = {"q8_0": ("Q8_0", 8, 1, 2), "q4_k": ("Q4_K", 12, 2, 2), "iq2_xxs": ("IQ2_XXS", 16, 4, 2),
              "iq1_s": ("IQ1_S", 19, 8, 1), "iq3_s": ("IQ3_S", 21, 4, 2)}

SDIST_URL = ("https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59"
             "fe7cf3/llama_cpp_python-0.3.36.tar.gz")
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
SDIST_NAME = "llama_cpp_python-0.3.36.tar.gz"
SDIST_GGML = "llama_cpp_python-0.3.36/vendor/llama.cpp/ggml/"


def _kernel(kernel: str, params: str, template: str = "") -> str:
    return f"{template}static __global__ void {kernel}(\n        {params}) {{\n}}\n"


def _gated_kernel() -> str:
    """unary.cu's op_silu and gated kernel, with the product swiglu_q8's error model bounds."""
    body = f"static __device__ __forceinline__ float {glu.OP_SILU[0]}(float x) {{\n    {glu.OP_SILU[1]}\n}}\n"
    return body + _kernel(glu.KERNEL, glu.PARAMS, "template <float (*op)(float), typename T>\n").replace(
        "{\n}", f"{{\n    {glu.PRODUCT}\n}}")


def _combine_files() -> dict[str, str]:
    """moe_combine's chain (combine.py): its kernels, the arithmetic its error model bounds and the numbers its
    launches read, in the tree's files."""
    files = dict.fromkeys((*combine.SOURCES, "src/ggml-cuda/cpy.cuh", "src/ggml-cuda/ggml-cuda.cu"), "")
    for source, kernel, params in combine.KERNELS:
        files[source] += _kernel(kernel, params, "template <typename T>\n")
    for source, line in combine.ARITHMETIC:
        files[source] += f"    {line}\n"
    files[combine.REDUCTION] += "static void launch_moe_weighted_reduction() {\n    constexpr int threads = 256;\n}\n"
    files[combine.BINBCAST] += "    const int block_size = 128;\n"
    files[combine.HC] += "".join(f"void ggml_cuda_op_dsv4_hc_{op}(ggml_tensor * dst) {{\n    const int block_size = 256;\n}}\n"
                                 for op in ("pre", "post"))
    files[combine.NORM] += "".join((
        "if (add == nullptr) {\n    if (ncols < 1024) {\n        const dim3 block_dims(256, 1, 1);\n",
        "        launch(rms_norm_f32<256, true>);\n    } else {\n        const dim3 block_dims(1024, 1, 1);\n",
        "        launch(rms_norm_f32<1024, true>);\n    }\n}\n"))
    files["src/ggml-cuda/cpy.cuh"] += "#define CUDA_CPY_BLOCK_SIZE 64\n"
    files["src/ggml-cuda/ggml-cuda.cu"] += "static constexpr int MOE_WEIGHTED_REDUCTION_MAX_EXPERTS = 15;\n"
    return files


def _to_fp16_kernels() -> str:
    """convert.cu's to-FP16 kernels of fp16deq's variant, and the macro its q8_0 launch reads."""
    (_, q8_0, q8_0_params), (_, iq4_xs, iq4_xs_params) = to_fp16.KERNELS
    return (f"#define {to_fp16.NE_ALIGN_MACRO} 2048\n" + _kernel(q8_0, q8_0_params, "template <bool need_check>\n")
            + _kernel(iq4_xs, iq4_xs_params, "template<typename dst_t>\n"))


def _mmq_files() -> dict[str, str]:
    """mmq.cuh's mul_mat_q, quantize.cu's quantize_mmq_q8_1 (appended by the caller), a two-line Ampere
    config table and q8_0's template instance: what family mmq's variant reads."""
    (mmq_cuh, main, main_params), (_, quantize, quantize_params) = mmq.KERNELS
    configs = "".join(f"    CASE(GGML_TYPE_Q8_0, 256, 1, 128, {j}, GGML_CUDA_MMQ_SRAM_LAYOUT_Q8_0, MMQ_ITER_K, true, {f});\n"
                      for j, f in ((16, "false"), (128, "true")))
    return {mmq_cuh: "#define MMQ_ITER_K 256\n" + _kernel(main, main_params, "template <ggml_type type, int J, bool f>\n"),
            mmq.CONFIG_AMPERE: configs, mmq.instance_source("q8_0"): '#include "../mmq.cuh"\n',
            "quantize_mmq": _kernel(quantize, quantize_params, "template <int ds_layout, bool scatter>\n")}


def _mmq_dot_lines() -> dict[str, str]:
    """What family mmq's error model reads (mmq_dots.lacking): mmq.cuh's MMA dispatch of each format's dot and
    the lines whose rounding it emulates, appended to their files."""
    from strata_bench.ggml.tree import TYPE_NAMES

    dispatch = "".join(f"        case GGML_TYPE_{TYPE_NAMES[fmt]}:\n            return ggml_cuda_mmq_util_funcs(\n"
                       f"                -1, ggml_cuda_mmq_load_tiles_{fmt}<type, J, fallback>,\n"
                       f"                ggml_cuda_mmq_{dot.name}<type, J, fallback>, wb<type, J, fallback>);\n"
                       for fmt, dot in mmq_dots.DOTS.items())
    out = {mmq.MMQ_CUH: "template <ggml_type type, int J, bool fallback, ggml_prec prec_src1 = GGML_PREC_Q8>\n"
                        "static constexpr __device__ ggml_cuda_mmq_util_funcs ggml_cuda_mmq_get_util_funcs() {\n"
                        f"    switch (type) {{\n{dispatch}    }}\n}}\n"
                        "template <ggml_type type> static constexpr __device__ int ggml_cuda_mmq_get_vdr() {}\n"}
    for source, line in mmq_dots.ARITHMETIC:
        out[source] = out.get(source, "") + line + "\n"
    return out


def write_fake_tree(root: Path) -> Path:
    """A ggml-shaped tree at `root` (its ggml/ folder); returns `root`."""
    mmq_files = _mmq_files()
    files = {
        "CMakeLists.txt": "cmake_minimum_required(VERSION 3.14)\nproject(\"ggml\" C CXX)\n"
                          "set(GGML_VERSION_MAJOR 0)\nset(GGML_VERSION_MINOR 9)\nset(GGML_VERSION_PATCH 4)\n",
        "include/ggml.h": "enum ggml_type {\n    GGML_TYPE_F32 = 0,\n    // GGML_TYPE_Q4_2 = 4, removed\n"
                          + "".join(f"    GGML_TYPE_{n} = {i},\n" for n, i, _, _ in FAKE_TYPES.values())
                          + "    GGML_TYPE_IQ4_XS = 23,\n    GGML_TYPE_COUNT = 43,\n};\n"
                          + "enum ggml_glu_op {\n    GGML_GLU_OP_REGLU,\n    GGML_GLU_OP_GEGLU,\n    GGML_GLU_OP_SWIGLU,\n"
                            "    GGML_GLU_OP_COUNT,\n};\n",
        "src/ggml-common.h": "#define QK_K 256\n" + "".join(
            f"#define QI{n[1:] if n[0] == 'Q' else n[2:]} (QK_K / (4*QR{n[1:] if n[0] == 'Q' else n[2:]}))\n"
            f"#define QR{n[1:] if n[0] == 'Q' else n[2:]} {qr}\n" for n, _, qr, _ in FAKE_TYPES.values()),
        "src/ggml-cuda/vecdotq.cuh": "".join(f"#define VDR_{n}_Q8_1_MMVQ {vdr}\n#define VDR_{n}_Q8_1_MMQ 8\n"
                                             for n, _, _, vdr in FAKE_TYPES.values()),
        "src/ggml-cuda/common.cuh": f"#pragma once\nstruct {moe.FUSION_STRUCT} {{\n    "
                                    + moe.FUSION_FIELDS.replace("; ", ";\n    ") + "\n};\n",
        "src/ggml-cuda/unary.cuh": f"#define {glu.BLOCK_MACRO} 256\n"
                                   f"__device__ __forceinline__ float {moe.SILU[0]}(float x) {{\n    {moe.SILU[1]}\n}}\n",
        glu.UNARY: _gated_kernel(),
        MMVQ: _kernel(*SIGNATURES[MMVQ], "template <ggml_type type, int ncols_dst, bool has_fusion, "
                                         "bool small_k = false, bool halve_iters = false>\n"),
        CONVERT: _kernel(*SIGNATURES[CONVERT], "template<typename dst_t>\n") + _to_fp16_kernels(),
        QUANTIZE: _kernel(*SIGNATURES[QUANTIZE]) + mmq_files.pop("quantize_mmq"),
        **mmq_files,
        **_combine_files(),
        mmid.SOURCE: _kernel(mmid.KERNEL, mmid.PARAMS, "template <int n_expert_used_template>\n"),
        "src/ggml-cpu/ops.h": "// the CPU backend: no CUDA build reads it\n",
        "README.md": "ggml\n",
    }
    for relative, text in _mmq_dot_lines().items():
        files[relative] = files.get(relative, "") + text
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def with_iq4_nl(root: Path) -> Path:
    """The fake tree at `root` with iq4_nl too (type 20, QR 2, VDR 2): a down format of grouped's that ggml has."""
    header = root / "include/ggml.h"
    header.write_text(header.read_text().replace("GGML_TYPE_IQ4_XS = 23,", "GGML_TYPE_IQ4_NL = 20,\n    "
                                                                       "GGML_TYPE_IQ4_XS = 23,"))
    with (root / "src/ggml-common.h").open("a") as f:
        f.write("#define QR4_NL 2\n")
    with (root / "src/ggml-cuda/vecdotq.cuh").open("a") as f:
        f.write("#define VDR_IQ4_NL_Q8_1_MMVQ 2\n")
    return root


def lacking_after(root: Path, lacking, where: str, old: str, new: str) -> str | None:
    """`lacking(tree)` of the fake tree at `root` with `old` replaced by `new` in its file `where`, once it
    has checked that the unchanged tree lacks nothing."""
    from strata_bench.ggml.tree import locate

    assert lacking(locate(root)) is None
    path = root / where
    path.write_text(path.read_text().replace(old, new))
    return lacking(locate(root))


def sdist_cache() -> Path:
    return Path(os.environ.get("STRATA_GGML_SDIST_CACHE") or Path.home() / ".cache/strata-bench/ggml-sdist")


def _download(target: Path) -> None:
    import urllib.request

    partial = target.with_name(f"{target.name}.part{os.getpid()}")
    try:
        with urllib.request.urlopen(SDIST_URL, timeout=60) as response, partial.open("wb") as out:
            shutil.copyfileobj(response, out)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class Unavailable(Exception):
    """The pinned sdist could not be had (no network, a wrong checksum): why, in one line."""


def pinned_sdist_tree() -> Path:
    """The ggml/ folder of llama-cpp-python 0.3.36's sdist, extracted once into the cache (only
    vendor/llama.cpp/ggml/); Unavailable when it cannot be had."""
    cache = sdist_cache()
    tree = cache / "ggml-0.3.36"
    if (tree / MMVQ).is_file():
        return tree
    tarball = cache / SDIST_NAME
    try:
        cache.mkdir(parents=True, exist_ok=True)
        if not tarball.is_file():
            _download(tarball)
    except OSError as exc:  # urllib's errors are OSErrors
        raise Unavailable(f"the pinned sdist could not be had ({SDIST_URL}): {exc}") from None
    if (got := _sha256(tarball)) != SDIST_SHA256:
        raise Unavailable(f"{tarball}: sha256 {got}, not the pinned {SDIST_SHA256}")
    staging = cache / f"ggml-0.3.36.tmp{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(tarball, "r:gz") as tar:
        members = []
        for m in tar.getmembers():
            if m.name.startswith(SDIST_GGML) and (m.isfile() or m.isdir()):
                m.name = m.name[len(SDIST_GGML):]
                if m.name:
                    members.append(m)
        tar.extractall(staging, members=members, filter="data")
    if not tree.exists():
        os.replace(staging, tree)
    shutil.rmtree(staging, ignore_errors=True)
    return tree

