"""A ggml tree's kernels as variants of the two fusion families (variants.attach calls these):
- swiglu_q8: unary.cu's SwiGLU then quantize.cu's quantize_q8_1 (glu.py), two launches, as ggml runs them;
- moe_combine: moe-weighted-reduction.cu, binbcast.cu's add, dsv4-hc.cu's residual post and pre, norm.cu's
  rms_norm fused with its mul, and cpy.cu's cast to fp16 (combine.py): the chain ggml runs for the same
  computation, which never forms the inverse RMS or the fp16 remainder (Variant.omits).
Each is judged by its family's own bounds recomputed with ggml's arithmetic (fusion_error.py) and is built
from the tree's own sources (one unit a source), only where its family's cases run.
"""
from __future__ import annotations

from typing import Any, Mapping

from strata_bench.cases.family import Variant
from strata_bench.ggml import convert, glu
from strata_bench.ggml.build import source_build, source_unit
from strata_bench.ggml.fusion_error import SwigluErrorModel
from strata_bench.ggml.launch import checker, lookup_in
from strata_bench.ggml.tree import QUANTIZE, GgmlTree


def attach_swiglu_q8(family: Any, tree: GgmlTree, name: str, same_as: str | None) -> None:
    gated, quantize = source_unit(tree, glu.UNARY, name), source_unit(tree, QUANTIZE, name)
    block = glu.block_size(tree)
    abi = family.launch_abi()

    def kernels(fam: Any, src: str) -> list[str]:
        return {gated: [glu.NAME], quantize: [convert.QUANTIZE_KERNEL]}.get(src, [])

    def launch(fam: Any, case: Any, kernels_: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
               stream: Any = None) -> None:
        args = {a.name: a.value(case, dev, outs) for a in abi.args if a.name in ("gate", "up", "h")}
        ld = abi.fields(case)["ld"]
        # GLU (SWIGLU) into the fp32 workspace h, then h's q8_1 rows: two nodes of ggml's graph.
        glu.plan(block, case.rows, case.cols, args["gate"], args["up"], ld, args["h"]).run(
            lookup_in(kernels_, gated), stream)
        convert.quantize_plan(case.rows, case.cols, args["h"], outs["q"]).run(lookup_in(kernels_, quantize), stream)

    variant = Variant(name, kernels, launch, f"llama.cpp's SwiGLU then quantize_q8_1, ggml {tree.version}",
                      error_model=SwigluErrorModel(), same_as=same_as)
    label = f"--ggml variant {name!r}"
    family.add_variant(variant, gated, (), source_build(tree, glu.UNARY, label, checker(lambda e: glu.SIGNATURE, name)))
    family.add_source(quantize, (), source_build(tree, QUANTIZE, label,
                                                 checker(lambda e: convert.QUANTIZE_SIGNATURE, name)))
