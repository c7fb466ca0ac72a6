"""llama.cpp's own CUDA kernels beside the built-ins (`--ggml PATH`, `--ggml-b PATH`): an unchanged ggml tree
is built with nvcc as ggml builds it (by NVRTC where nvcc is not found) and its mat-vec (plain and MoE),
dequantization, q8_1 and to-FP16 kernels join the mmvq, dequant, q8_1, fp16deq and grouped families as
variants, its kernel chains for the two fusions join swiglu_q8 and moe_combine, and its prompt GEMM
(mul_mat_q) adds family mmq and, with expert ids, joins pfgemm, launched as ggml launches them
(docs/GGML.md)."""
from __future__ import annotations

from typing import Any, Mapping

from strata_bench.errors import InputError


def load(families: Mapping[str, Any], ggml: str, ggml_b: str | None = None,
         formats: tuple[str, ...] = ()) -> dict[str, str]:
    """Attach variant `ggml` from the tree at `ggml` (and `ggml_b`, held to its bits, from `ggml_b`);
    InputError for a path that holds no usable tree or a --format neither tree has kernels for. Returns
    family -> one line naming the tree and the kernel it lacks, for the families left without a variant."""
    from strata_bench.formats import all_formats
    from strata_bench.ggml.tree import locate
    from strata_bench.ggml.variants import attach
    from strata_bench.ggml.variants import lacking as kernels_lacking

    tree = locate(ggml, "--ggml")
    second = locate(ggml_b, "--ggml-b") if ggml_b is not None else None
    lacking = [f for f in formats if f in all_formats() and f not in tree.formats]  # f32 is q8_1's input
    if lacking:
        raise InputError(f"--format {lacking[0]}: ggml has no {lacking[0]} kernels here "
                         f"(ggml {tree.version}: {', '.join(tree.formats)})")
    attach(families, tree, "ggml")
    lines = {family: f"--ggml {tree.root}: {why}" for family, why in kernels_lacking(tree).items()}
    _attach_mmq(families, tree, "ggml", None, formats, lines, "--ggml")
    if second is not None:
        attach(families, second, "ggml_b", same_as="ggml")
        for family, why in kernels_lacking(second, bounded=False).items():
            lines.setdefault(family, f"--ggml-b {second.root}: {why}")
        _attach_mmq(families, second, "ggml_b", "ggml", formats, lines, "--ggml-b")
    return lines


def _attach_mmq(families: Any, tree: Any, name: str, same_as: str | None, formats: tuple[str, ...],
                lines: dict[str, str], option: str) -> None:
    """Family mmq and pfgemm's variant with the tree's mul_mat_q, or a line in `lines` naming what the tree
    lacks for each that cannot have it."""
    from strata_bench.ggml import mmq_variants

    for family, why in mmq_variants.attach(families, tree, name, same_as, formats, skip=set(lines)).items():
        lines.setdefault(family, f"{option} {tree.root}: {why}")
