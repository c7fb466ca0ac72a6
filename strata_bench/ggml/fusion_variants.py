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

import numpy as np

from strata_bench.cases.family import Variant
from strata_bench.ggml import combine, convert, glu
from strata_bench.ggml.build import source_build, source_unit
from strata_bench.ggml.fusion_error import CombineErrorModel, SwigluErrorModel
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


WORK = ("c0", "c", "x", "y")  # moe_combine's chain: its fp32 intermediates, [T][H] each


def attach_moe_combine(family: Any, tree: GgmlTree, name: str, same_as: str | None) -> None:
    numbers = combine.numbers(tree)
    units = {source: source_unit(tree, source, name) for source in combine.SOURCES}
    names = combine.instances(numbers)
    prefix = f"{name}_"

    def kernels(fam: Any, src: str) -> list[str]:
        return next((list(names[s]) for s, u in units.items() if u == src), [])

    def prepare(fam: Any, case: Any, dev: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        geo = fam.geometry(case)
        t, h = geo["T"], geo["H"]
        # The chain's fp32 intermediates (ggml's graph allocates each node's tensor), and the experts' rows
        # packed where the case pads them: the weighted reduction reads contiguous [T][K][H] rows.
        made = {prefix + k: cupy.empty((t, h), dtype=cupy.float32) for k in WORK}
        if geo["ld"] != h:
            made[prefix + "Y"] = cupy.ascontiguousarray(dev["Y"][..., :h])
        return made

    def launch(fam: Any, case: Any, kernels_: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
               stream: Any = None) -> None:
        geo = fam.geometry(case)
        shape = {k: geo[k] for k in ("T", "H", "K", "ld")}
        work = {k: dev[prefix + k] for k in WORK}
        work["Y"] = dev.get(prefix + "Y", dev["Y"])  # packed where the case pads its rows
        for source, step in combine.chain(numbers, shape, dev, work, outs, np.float32(geo["eps"])):
            step.run(lookup_in(kernels_, units[source]), stream)

    variant = Variant(name, kernels, launch, f"llama.cpp's MoE weighted reduction, add, DSV4 residual post/pre, "
                                             f"rms_norm*mul and cast to fp16, ggml {tree.version}",
                      applies=lambda case: numbers.fuses(case.ncols), error_model=CombineErrorModel(numbers),
                      prepare=prepare, same_as=same_as, omits=("rs", "xn16_lo", "xn16+lo"))
    check = checker(combine.signature, name)
    label = f"--ggml variant {name!r}"
    first, *rest = combine.SOURCES
    family.add_variant(variant, units[first], (), source_build(tree, first, label, check))
    for source in rest:
        family.add_source(units[source], (), source_build(tree, source, label, check))
