"""scripts/engine_plant.py: the planted slowdown and one-ulp change are made in a copy, on text as llama.cpp
writes it, and refused (exit 1) where that text is missing."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("engine_plant", ROOT / "scripts" / "engine_plant.py")
engine_plant = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(engine_plant)

# The shape of llama.cpp's text (2026): only the lines the plants anchor on.
MMVQ = """static constexpr __device__ vec_dot_q_cuda_t get_vec_dot_q_cuda(ggml_type type) {
    switch (type) {
        case GGML_TYPE_IQ4_NL:  return vec_dot_iq4_nl_q8_1;
        case GGML_TYPE_IQ4_XS:  return vec_dot_iq4_xs_q8_1;
        default:                return nullptr;
    }
}

static void mul_mat_vec_q_switch_type(
        const void * vx, const ggml_type type_x, cudaStream_t stream) {
    switch (type_x) {}
}

void ggml_cuda_mul_mat_vec_q(
        ggml_backend_cuda_context & ctx, const ggml_tensor * src0) {
    mul_mat_vec_q_switch_type(src0->data, src0->type, stream);
}
"""


def _tree(root: Path) -> Path:
    for rel, text in ((engine_plant.MMVQ, MMVQ), ("CMakeLists.txt", "x\n")):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_slow_mmvq_wraps_the_type_switch_before_the_entry(tmp_path):
    tree = _tree(tmp_path / "a")
    assert engine_plant.main(["slow-mmvq", str(tree), str(tmp_path / "b")]) == 0
    text = (tmp_path / "b" / engine_plant.MMVQ).read_text()
    assert "\nstatic void mul_mat_vec_q_switch_type_impl(\n" in text
    assert text.count("mul_mat_vec_q_switch_type_impl(args...);") == 2 and "% 10 == 0" in text
    assert text.index("static void mul_mat_vec_q_switch_type(Args... args)") < text.index("void ggml_cuda_mul_mat_vec_q(")
    assert (tree / engine_plant.MMVQ).read_text() == MMVQ  # the original is untouched


def test_ulp_wraps_only_the_iq4_xs_dot_in_the_mat_vec_table(tmp_path):
    tree = _tree(tmp_path / "a")
    assert engine_plant.main(["ulp-iq4_xs", str(tree), str(tmp_path / "b")]) == 0
    text = (tmp_path / "b" / engine_plant.MMVQ).read_text()
    assert text.startswith(engine_plant.ULP_DOT)  # defined before the table that names it
    assert "case GGML_TYPE_IQ4_XS:  return strata_vec_dot_iq4_xs_q8_1_ulp;" in text
    assert "case GGML_TYPE_IQ4_NL:  return vec_dot_iq4_nl_q8_1;" in text  # the other formats untouched
    assert text.replace(engine_plant.ULP_DOT, "").replace("strata_vec_dot_iq4_xs_q8_1_ulp;",
                                                          "vec_dot_iq4_xs_q8_1;") == MMVQ


def test_missing_text_is_refused_without_a_copy(tmp_path, capsys):
    tree = _tree(tmp_path / "a")
    (tree / engine_plant.MMVQ).write_text(MMVQ.replace("case GGML_TYPE_IQ4_XS:  return vec_dot_iq4_xs_q8_1;\n", ""))
    assert engine_plant.main(["ulp-iq4_xs", str(tree), str(tmp_path / "b")]) == 1
    assert capsys.readouterr().err == (f"plant ulp-iq4_xs not made: {engine_plant.MMVQ}: no 'case GGML_TYPE_IQ4_XS: "
                                       f"return vec_dot_iq4_xs_q8_1;' inside 'static constexpr __device__ "
                                       f"vec_dot_q_cuda_t get_vec_dot_q_cuda(' at a line start\n")
    assert not (tmp_path / "b").exists()


def test_the_copy_keeps_build_named_sources_and_leaves_build_folders_out(tmp_path):
    tree = _tree(tmp_path / "a")
    for rel in ("cmake/build-info.cmake", "common/build-info.cpp.in", "build/CMakeCache.txt", "build-cuda/x.o",
                ".git/HEAD", "ggml/.git/HEAD"):
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text("x\n")
    assert engine_plant.main(["slow-mmvq", str(tree), str(tmp_path / "b")]) == 0
    copied = sorted(str(p.relative_to(tmp_path / "b")) for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert copied == ["CMakeLists.txt", "cmake/build-info.cmake", "common/build-info.cpp.in", engine_plant.MMVQ]
