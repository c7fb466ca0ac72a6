"""A ggml launch's kernel name found among nvcc's symbols (ggml/spelling.py): the symbols of an nvcc cubin of
the pinned tree's mmq-instance-q8_0.cu, recorded (nvcc 13.0, sm_90, c++filt's text) in
nvcc_symbols_mmq_q8_0.json, spell mul_mat_q's defaulted fourth argument (ggml_prec prec_src1 =
GGML_PREC_Q8) that ggml's launch, and so mmq.kernel_names, leaves out."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from strata_bench.ggml import spelling
from strata_bench.kernels.cubin_symbols import KernelNotFound, find_kernel

RECORDED = json.loads((Path(__file__).parent / "nvcc_symbols_mmq_q8_0.json").read_text())
INSTANCE = "src/ggml-cuda/template-instances/mmq-instance-q8_0.cu"


def _cu_filt(text: str) -> str:
    """c++filt's text as the toolkit's cu++filt writes it (the H100 host's): every value with its type."""
    def typed(m: re.Match) -> str:
        value = m.group(2)
        cast = {"true": "(bool)1", "false": "(bool)0"}.get(value, f"(int){value}")
        return f"{m.group(1)}{cast}"
    return re.sub(r"([<,] )(\d+|true|false)(?=[,>])", typed, text)


def _mini_tree(root: Path, template: str = "template <ggml_type type, int J, bool fallback, "
                                           "ggml_prec prec_src1 = GGML_PREC_Q8>") -> Path:
    (root / "include").mkdir(parents=True)
    (root / "src" / "ggml-cuda").mkdir(parents=True)
    (root / "include" / "ggml.h").write_text(
        "enum ggml_prec {\n    GGML_PREC_UNDEFINED = 0,\n    GGML_PREC_DEFAULT = 0, // deprecated\n"
        "    GGML_PREC_F32 = 10,\n    GGML_PREC_Q8 = 30,\n    GGML_PREC_Q4,\n};\n")
    (root / "src" / "ggml-cuda" / "mmq.cuh").write_text(
        "template <ggml_type type> static __device__ void load_tiles(int i);\n"
        f"{template}\n__launch_bounds__(f(type, J), 1)\nstatic __global__ void mul_mat_q(\n"
        "        const char * x, float * dst) {\n    load_tiles<type>(0);\n}\n")
    return root


@pytest.mark.parametrize("text", ["c++filt", "cu++filt"])
@pytest.mark.parametrize("cols,fallback", [(8, "true"), (104, "false"), (128, "true")])
def test_launch_name_finds_its_nvcc_symbol(real_tree, text, cols, fallback):
    demangled = RECORDED if text == "c++filt" else {k: _cu_filt(v) for k, v in RECORDED.items()}
    declared = f"mul_mat_q<(ggml_type)8, {cols}, {fallback}>"
    with pytest.raises(KernelNotFound, match="matches no kernel"):  # as declared: the fourth is missing
        find_kernel(declared, RECORDED, "where", demangled)
    spelled = spelling.complete(real_tree, real_tree / INSTANCE, declared)
    assert spelled == f"mul_mat_q<(ggml_type)8, {cols}, {fallback}, (ggml_prec)30>"
    symbol = find_kernel(spelled, RECORDED, "where", demangled)
    assert f"ELi{cols}ELb{int(fallback == 'true')}EL9ggml_prec30E" in symbol and symbol.startswith("_Z9mul_mat_q")


def test_fixup_name_is_completed_too(real_tree):
    spelled = spelling.complete(real_tree, real_tree / INSTANCE, "mul_mat_q_stream_k_fixup<(ggml_type)8, 16, true>")
    assert find_kernel(spelled, RECORDED, "where", RECORDED).startswith("_Z24mul_mat_q_stream_k_fixup")


def test_nvcc_build_of_a_tree_spells_defaults(real_tree, monkeypatch):
    """ggml's nvcc SourceBuild carries the completion, so every variant's lookup goes through it."""
    from strata_bench.ggml import build
    from strata_bench.ggml.tree import locate

    monkeypatch.setenv(build.COMPILER_ENV, "nvcc")
    spec = build.source_build(locate(real_tree), INSTANCE, "--ggml variant 'ggml'")
    assert spec.symbol_name("mul_mat_q<(ggml_type)8, 8, true>") == "mul_mat_q<(ggml_type)8, 8, true, (ggml_prec)30>"


@pytest.mark.parametrize("expr", [
    "mul_mat_q<(ggml_type)8, 8, true, (ggml_prec)40>",  # every argument named: kept
    "quantize_q8_1",  # no template instance
    "mul_mat_q<(ggml_type)8, 8>",  # a parameter without default left out: the matcher names the candidates
    "other_kernel<1>",  # not declared in the tree
])
def test_names_left_as_they_are(tmp_path, expr):
    root = _mini_tree(tmp_path / "ggml")
    assert spelling.complete(root, root / "src/ggml-cuda/mmq.cu", expr) == expr


def test_defaults_spelled_as_the_demangler_writes_them(tmp_path):
    root = _mini_tree(tmp_path / "ggml", "template <int J, bool fallback = false, int n = 4u, "
                                         "ggml_prec prec = GGML_PREC_Q4, typename T = float>")
    assert spelling.complete(root, root / "src/ggml-cuda/mmq.cu", "mul_mat_q<8>") == \
        "mul_mat_q<8, false, 4, (ggml_prec)31, float>"


def test_enumerators_follow_cs_rule():
    assert spelling._enumerators("A = 0, B, C = A, D = 0x10, E") == {"A": 0, "B": 1, "C": 0, "D": 16, "E": 17}
    assert spelling._enumerators("A = 1, B = 1 << 3, C") == {"A": 1}  # an expression: the rest unknown


def test_template_of_another_declaration_is_not_taken(tmp_path):
    """A kernel that is no template does not take the template of the declaration before it."""
    root = _mini_tree(tmp_path / "ggml")
    (root / "src/ggml-cuda/k.cu").write_text("template <int n = 1> static __device__ void f();\n"
                                             "static __global__ void k(int x) {}\n")
    assert spelling.kernel_params(root, root / "src/ggml-cuda/k.cu", "k") is None


def test_split_keeps_nested_arguments():
    assert spelling.split_template("ns::k<a, f<b, c>, (t)1>") == ("ns::k", ["a", "f<b, c>", "(t)1"])
