"""A ggml tree's kernels as variants of the built-in families (`--ggml`, `--ggml-b`).

`attach(families, tree, "ggml")` appends to each family's table a variant built by nvcc from the tree's
own source and launched by this package's plans; from then on every check a built-in variant gets, it
gets: the poisoned double launch, bitwise checks and diagnoses, the float64 references, bench and A/B.
- mmvq: every format the tree and strata-bench both have, 1-8 columns (MMVQ_MAX_BATCH_SIZE); on the
  formats the built-ins have, judged by ggml's arithmetic (ggml/error.py), not bitwise against `old`;
  on the others (the K-quants, q4_0 .. q5_1) it is the cases' only variant, judged by the family's bound;
- dequant: bitwise gguf-py's float32, on every format both have;
- q8_1: bitwise strata-bench's quantization;
- fp16deq: ggml's to-FP16 kernels (to_fp16.py) on the cases whose output is contiguous, bitwise `old`;
- grouped: ggml's MoE mat-vec (moe.py: mul_mat_vec_q with expert ids, gate/up fused with SwiGLU), on the
  gate and down formats the tree has, judged by grouped's bounds widened by ggml's arithmetic;
- swiglu_q8 (and moe_combine): the chains of ggml kernels that compute the fusion families' outputs
  (fusion_variants.py), judged by the families' bounds with ggml's arithmetic.
A tree that lacks a kernel one of these families needs beyond the three every tree is checked for
(`lacking`) leaves that family without its variant; the others get theirs.
A second tree (`--ggml-b`, variant `ggml_b`) is held to the first's bits (Variant.same_as), case by case.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from strata_bench.cases.family import Variant
from strata_bench.errors import InputError
from strata_bench.ggml import combine, convert, fusion_variants, glu, mmvq, moe, moe_tokens, to_fp16
from strata_bench.ggml.build import source_build, source_unit
from strata_bench.ggml.error import RAW_SUM, TRUNCATING, ZERO_SIGN_FORMATS, GgmlErrorModel, MoeErrorModel, ZeroSignModel
from strata_bench.ggml.launch import checker, compute_capability, lookup_in, needs_packing, packed_rows
from strata_bench.ggml.tree import CONVERT, MMVQ, QUANTIZE, GgmlTree

FAMILIES = ("mmvq", "dequant", "q8_1", "fp16deq", "grouped", "swiglu_q8", "moe_combine")


def attach(families: Mapping[str, Any], tree: GgmlTree, name: str = "ggml", same_as: str | None = None) -> list[str]:
    """Add variant `name` from `tree` to the families it has kernels for (all but those `lacking` names);
    returns those families."""
    from strata_bench.formats import all_formats

    missing = [f for f in FAMILIES if f not in families]
    if missing:
        raise InputError(f"--ggml: the families {', '.join(missing)} are not loaded")
    known = set(all_formats())
    formats = tuple(f for f in tree.formats if f in known)
    attachers = {"mmvq": lambda fam: _attach_mmvq(fam, tree, name, formats, same_as),
                 "dequant": lambda fam: _attach_dequant(fam, tree, name, formats, same_as),
                 "q8_1": lambda fam: _attach_q8_1(fam, tree, name, same_as),
                 "fp16deq": lambda fam: _attach_fp16deq(fam, tree, name, formats, same_as),
                 "grouped": lambda fam: _attach_grouped(fam, tree, name, formats, same_as),
                 "swiglu_q8": lambda fam: fusion_variants.attach_swiglu_q8(fam, tree, name, same_as),
                 "moe_combine": lambda fam: fusion_variants.attach_moe_combine(fam, tree, name, same_as)}
    skipped = lacking(tree, bounded=same_as is None)
    for family, attach_one in attachers.items():
        if family not in skipped:
            attach_one(families[family])
    return [f for f in FAMILIES if f not in skipped]


def lacking(tree: GgmlTree, bounded: bool = True) -> dict[str, str]:
    """family -> why the tree cannot give it a variant (a kernel it launches is missing or its parameters
    changed), for the families whose kernels the tree's own check (tree.SIGNATURES) does not cover. A tree
    held to another's bits (`bounded` False: --ggml-b) need not have the arithmetic the fusion families' error
    models bound: a change to it is what --ggml-b is there to catch."""
    reasons = {"fp16deq": to_fp16.lacking(tree), "grouped": moe.lacking(tree),
               "swiglu_q8": glu.lacking(tree, bounded), "moe_combine": combine.lacking(tree, bounded)}
    return {family: why for family, why in reasons.items() if why is not None}


def _attach_mmvq(family: Any, tree: GgmlTree, name: str, formats: tuple[str, ...], same_as: str | None) -> None:
    unit, key = source_unit(tree, MMVQ, name), f"{name}_w"
    abi = family.launch_abi()
    own = family.own_formats or ()

    def kernels(fam: Any, src: str) -> list[str]:
        return mmvq.instances(tree, formats) if src == unit else []

    def prepare(fam: Any, case: Any, dev: Mapping[str, Any]) -> dict[str, Any]:
        _check_device(dev["w"])  # once per device copy, before anything launches on it
        f = abi.fields(case)
        readable = mmvq.readable_rows(tree, f, case.fmt)
        if not needs_packing(f["stride"], f["row_bytes"], f["rows"], readable):
            return {}
        return {key: packed_rows(dev["w"], f["rows"], f["stride"], f["row_bytes"], readable)}

    def launch(fam: Any, case: Any, kernels_: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
               stream: Any = None) -> None:
        abi.prelude(fam, case, kernels_, dev, stream)
        f = abi.fields(case)
        w, stride = (dev[key], f["row_bytes"]) if key in dev else (dev["w"], f["stride"])
        mmvq.plan(tree, case.fmt, f, w, stride, dev["xq"], outs["y"]).run(lookup_in(kernels_, unit), stream)

    model = GgmlErrorModel(tuple(f for f in formats if f in own))
    variant = Variant(name, kernels, launch, f"llama.cpp's mul_mat_vec_q, ggml {tree.version}",
                      applies=lambda case: case.ncols <= mmvq.MAX_COLUMNS, error_model=model, formats=formats,
                      prepare=prepare, same_as=same_as)
    build = source_build(tree, MMVQ, f"--ggml variant {name!r}", checker(lambda e: mmvq.SIGNATURE, name))
    family.add_variant(variant, unit, (), build)


def _check_device(array: Any) -> None:
    """mmvq.check_device for the device a device array is on."""
    cc = compute_capability(array)
    if cc is not None:
        mmvq.check_device(*cc)


def _attach_dequant(family: Any, tree: GgmlTree, name: str, formats: tuple[str, ...], same_as: str | None) -> None:
    unit, key = source_unit(tree, CONVERT, name), f"{name}_w"
    abi = family.launch_abi()
    names = {convert.dequant_kernel(f): f for f in formats}

    def kernels(fam: Any, src: str) -> list[str]:
        return list(names) if src == unit else []

    def prepare(fam: Any, case: Any, dev: Mapping[str, Any]) -> dict[str, Any]:
        f = abi.fields(case)
        row_bytes = f["nchunks"] * 32 // f["block_values"] * f["block_bytes"]
        if not needs_packing(f["stride"], row_bytes, f["rows"], f["rows"]):
            return {}
        return {key: packed_rows(dev["w"], f["rows"], f["stride"], row_bytes, f["rows"])}

    def launch(fam: Any, case: Any, kernels_: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
               stream: Any = None) -> None:
        plan = convert.dequant_plan(case.fmt, case.rows * case.cols, dev.get(key, dev["w"]), outs["y"])
        plan.run(lookup_in(kernels_, unit), stream)

    signed = tuple(f for f in ZERO_SIGN_FORMATS if f in formats)
    zero_sign = ZeroSignModel(signed) if signed else None
    variant = Variant(name, kernels, launch, f"llama.cpp's dequantize_block kernels, ggml {tree.version}",
                      formats=formats, prepare=prepare, same_as=same_as, error_model=zero_sign)
    build = source_build(tree, CONVERT, f"--ggml variant {name!r}",
                         checker(lambda e: convert.dequant_signature(names[e]), name))
    family.add_variant(variant, unit, (), build)


def _attach_q8_1(family: Any, tree: GgmlTree, name: str, same_as: str | None) -> None:
    unit = source_unit(tree, QUANTIZE, name)
    abi = family.launch_abi()

    def kernels(fam: Any, src: str) -> list[str]:
        return [convert.QUANTIZE_KERNEL] if src == unit else []

    def launch(fam: Any, case: Any, kernels_: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
               stream: Any = None) -> None:
        convert.quantize_plan(case.rows, case.cols, dev["x"], outs["q8"]).run(lookup_in(kernels_, unit), stream)
        abi.epilogue(fam, case, kernels_, dev, outs, stream)

    variant = Variant(name, kernels, launch, f"llama.cpp's quantize_q8_1, ggml {tree.version}", same_as=same_as)
    build = source_build(tree, QUANTIZE, f"--ggml variant {name!r}",
                         checker(lambda e: convert.QUANTIZE_SIGNATURE, name))
    family.add_variant(variant, unit, (), build)


def _attach_fp16deq(family: Any, tree: GgmlTree, name: str, formats: tuple[str, ...], same_as: str | None) -> None:
    unit, key = source_unit(tree, CONVERT, name), f"{name}_w"
    align = to_fp16.ne_align(tree)
    mine = tuple(f for f in to_fp16.FORMATS if f in formats)

    def kernels(fam: Any, src: str) -> list[str]:
        return to_fp16.instances(mine) if src == unit else []

    def contiguous(case: Any) -> bool:
        # ggml writes y[0 .. rows x cols) in one run: no row padding, no offset from the allocation.
        geo = family.geometry(case)
        return geo["ld"] == case.cols and geo["offset"] == 0

    def prepare(fam: Any, case: Any, dev: Mapping[str, Any]) -> dict[str, Any]:
        cc = compute_capability(dev["w"])
        if cc is not None:
            to_fp16.check_device(cc[0])
        geo = fam.geometry(case)
        start, nbytes = geo["row0"] * geo["row_bytes"], case.rows * geo["row_bytes"]
        if not to_fp16.needs_aligned_copy(case.fmt, start, nbytes, dev["w"].nbytes):
            return {}
        return {key: to_fp16.aligned_copy(dev["w"], start, nbytes, case.fmt)}

    def launch(fam: Any, case: Any, kernels_: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
               stream: Any = None) -> None:
        row0 = fam.geometry(case)["row0"]
        w = dev[key] if key in dev else dev["w"][row0:row0 + case.rows]
        to_fp16.plan(case.fmt, case.rows * case.cols, align, w, outs["y"]).run(lookup_in(kernels_, unit), stream)

    # No error model: ggml's arithmetic is fp16deq's (one rounding of an exact product), so bitwise `old`.
    variant = Variant(name, kernels, launch, f"llama.cpp's to-FP16 dequantize kernels, ggml {tree.version}",
                      applies=contiguous, formats=mine, prepare=prepare, same_as=same_as)
    build = source_build(tree, CONVERT, f"--ggml variant {name!r}", checker(to_fp16.signature, name))
    family.add_variant(variant, unit, (), build)


def _attach_grouped(family: Any, tree: GgmlTree, name: str, formats: tuple[str, ...], same_as: str | None) -> None:
    """grouped's variant `name` (mul_mat_vec_q with expert ids, one token) and, where the tree has the
    multi-token kernel, `name`_moe (mul_mat_vec_q_moe: moe_tokens.py) from the same build of mmvq.cu."""
    from strata_bench.families.grouped import DOWN_FORMATS, GATE_FORMATS, groups_of
    from strata_bench.kernels.launch import launch_quantize_q8_1

    unit = source_unit(tree, MMVQ, name)
    gates = tuple(f for f in GATE_FORMATS if f in formats)
    # The down product's bound adds ggml's rounding alone: formats whose dot truncates or reads s are left out.
    downs = tuple(f for f in DOWN_FORMATS if f in formats and f not in TRUNCATING and f not in RAW_SUM)
    multi = moe_tokens.lacking(tree) is None

    def one_variant(vname: str, kernel: Any, check: Any, readable: Any, plan: Any, applies: Any, what: str) -> Any:
        prefix = f"{vname}_"

        def prepare(fam: Any, case: Any, dev: Mapping[str, Any]) -> dict[str, Any]:
            import cupy

            check(dev["gate"])  # once per device copy, before anything launches on it
            groups = groups_of(case)
            out = {f"{prefix}ids": cupy.asarray(np.repeat(np.arange(len(groups), dtype=np.int32), groups))}
            for matrix, (fmt, rows, k) in _matrices(case).items():
                packed = _packed_experts(dev[matrix], fmt, rows, k, len(groups), readable(fmt, rows, k, len(groups)))
                if packed is not None:
                    out[prefix + matrix] = packed
            return out

        def launch(fam: Any, case: Any, kernels_: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
                   stream: Any = None) -> None:
            experts, entries = len(groups_of(case)), case.ncols
            shapes = {m: _shape(fmt, rows, k, experts, entries) for m, (fmt, rows, k) in _matrices(case).items()}
            w = {m: dev.get(prefix + m, dev[m]) for m in shapes}
            lookup, ids = lookup_in(kernels_, unit), dev[f"{prefix}ids"]
            # x -> q8_1 -> H = up(x) * silu(gate(x)) in one fused launch -> q8_1 -> Y = down(H), as ggml's graph runs.
            launch_quantize_q8_1(kernels_, dev["x"], dev["xq"], entries * case.cols // 32, stream)
            plan(tree, case.fmt, shapes["up"], w["up"], dev["xq"], ids, outs["H"], gate=w["gate"]).run(lookup, stream)
            launch_quantize_q8_1(kernels_, outs["H"], dev["hq"], entries * case.rows // 32, stream)
            plan(tree, case.param("down"), shapes["down"], w["down"], dev["hq"], ids, outs["Y"]).run(lookup, stream)

        held = f"{same_as}{vname[len(name):]}" if same_as else None
        return Variant(vname, lambda fam, src: kernel() if src == unit else [], launch,
                       f"{what}, ggml {tree.version}",
                       applies=lambda case: case.fmt in gates and case.param("down") in downs and applies(case),
                       error_model=MoeErrorModel(gates), prepare=prepare, same_as=held)

    one = one_variant(name, lambda: moe.instances(tree, gates, downs), _check_device,
                      lambda fmt, rows, k, experts: moe.readable_rows(tree, fmt, rows, k, _block_values(fmt), experts),
                      moe.plan, lambda case: True, "llama.cpp's mul_mat_vec_q with expert ids")
    build = source_build(tree, MMVQ, f"--ggml variant {name!r}", checker(_mmvq_signature, name))
    family.add_variant(one, unit, (), build)
    if multi:
        limit = moe_tokens.numbers(tree)[1]
        family.add_variant(one_variant(
            f"{name}_moe", lambda: moe_tokens.instances(tree, gates, downs), _check_moe_device,
            lambda fmt, rows, k, experts: moe_tokens.readable_rows(tree, rows, experts), moe_tokens.plan,
            lambda case: moe_tokens.tokens(case.ncols, limit) is not None,
            "llama.cpp's mul_mat_vec_q_moe, its entries as tokens of expert slots"))


def _mmvq_signature(expr: str) -> Any:
    """The parameters a launch of one of mmvq.cu's kernels passes: mul_mat_vec_q_moe's, or mul_mat_vec_q's."""
    return moe_tokens.SIGNATURE if expr.startswith(moe_tokens.KERNEL) else mmvq.SIGNATURE


def _check_moe_device(array: Any) -> None:
    cc = compute_capability(array)
    if cc is not None:
        mmvq.check_device(*cc)
        moe_tokens.check_device(*cc)


def _block_values(fmt: str) -> int:
    from strata_bench.formats import get_format

    return get_format(fmt).block_size


def _matrices(case: Any) -> dict[str, tuple[str, int, int]]:
    """grouped's matrices: name -> (format, rows per expert, values per row)."""
    gate = (case.fmt, case.rows, case.cols)
    return {"gate": gate, "up": gate, "down": (case.param("down"), case.cols, case.rows)}


def _shape(fmt: str, rows: int, k: int, experts: int, entries: int) -> dict[str, int]:
    from strata_bench.formats import get_format

    spec = get_format(fmt)
    return {"rows": rows, "k": k, "experts": experts, "entries": entries, "block_values": spec.block_size,
            "block_bytes": spec.type_size}


def _packed_experts(w: Any, fmt: str, rows: int, k: int, experts: int, readable: int) -> Any:
    """grouped's padded expert matrices as ggml reads them (rows at whole blocks, `readable` rows: those the
    last CUDA block reads), or None where they already are."""
    from strata_bench.data.weights import row_stride
    from strata_bench.formats import get_format

    spec = get_format(fmt)
    stride, row_bytes = row_stride(fmt, k), spec.bytes_per_row(k)
    if not needs_packing(stride, row_bytes, experts * rows, readable):
        return None
    return packed_rows(w, experts * rows, stride, row_bytes, readable)
