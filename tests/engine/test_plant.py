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
MMVQ = """static void mul_mat_vec_q_switch_type(
        const void * vx, const ggml_type type_x, cudaStream_t stream) {
    switch (type_x) {}
}

void ggml_cuda_mul_mat_vec_q(
        ggml_backend_cuda_context & ctx, const ggml_tensor * src0) {
    mul_mat_vec_q_switch_type(src0->data, src0->type, stream);
}
"""
VECDOTQ = """static __device__ __forceinline__ float vec_dot_iq4_nl_q8_1(const void * vbq, const int & iqs) {
    return d * sumi;
}

static __device__ __forceinline__ float vec_dot_iq4_xs_q8_1(
    const void * __restrict__ vbq, const block_q8_1 * __restrict__ bq8_1, const int & kbx, const int & iqs) {
    sumi *= ls - 32;
    const float d = __half2float(bq4->d) * __low2float(bq8_1[iqs/4].ds);
    return d * sumi;
}
"""


def _tree(root: Path) -> Path:
    for rel, text in ((engine_plant.MMVQ, MMVQ), (engine_plant.VECDOTQ, VECDOTQ), ("CMakeLists.txt", "x\n")):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_slow_mmvq_wraps_the_type_switch_before_the_entry(tmp_path):
    tree = _tree(tmp_path / "a")
    assert engine_plant.main(["slow-mmvq", str(tree), str(tmp_path / "b")]) == 0
    text = (tmp_path / "b" / engine_plant.MMVQ).read_text()
    assert text.startswith("static void mul_mat_vec_q_switch_type_impl(\n")
    assert text.count("mul_mat_vec_q_switch_type_impl(args...);") == 2 and "% 33 == 0" in text
    assert text.index("static void mul_mat_vec_q_switch_type(Args... args)") < text.index("void ggml_cuda_mul_mat_vec_q(")
    assert (tree / engine_plant.MMVQ).read_text() == MMVQ  # the original is untouched


def test_ulp_changes_only_the_iq4_xs_dot(tmp_path):
    tree = _tree(tmp_path / "a")
    assert engine_plant.main(["ulp-iq4_xs", str(tree), str(tmp_path / "b")]) == 0
    text = (tmp_path / "b" / engine_plant.VECDOTQ).read_text()
    assert text.count("return d * sumi;") == 1 and text.count(engine_plant.ULP) == 1
    assert text.index(engine_plant.ULP) > text.index("vec_dot_iq4_xs_q8_1(")


def test_missing_text_is_refused_without_a_copy(tmp_path, capsys):
    tree = _tree(tmp_path / "a")
    (tree / engine_plant.VECDOTQ).write_text("float vec_dot_iq4_xs_q8_1(int x) {\n    return x;\n}\n")
    assert engine_plant.main(["ulp-iq4_xs", str(tree), str(tmp_path / "b")]) == 1
    assert capsys.readouterr().err == (f"plant ulp-iq4_xs not made: {engine_plant.VECDOTQ}: vec_dot_iq4_xs_q8_1 "
                                       f"without one 'return d * sumi;'\n")
    assert not (tmp_path / "b").exists()
