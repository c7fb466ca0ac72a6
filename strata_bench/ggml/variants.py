"""A ggml tree's kernels as variants of the mmvq, dequant and q8_1 families (`--ggml`, `--ggml-b`).

`attach(families, tree, "ggml")` appends to each family's table a variant built by nvcc from the tree's
own source and launched by this package's plans; from then on every check a built-in variant gets, it
gets: the poisoned double launch, bitwise checks and diagnoses, the float64 references, bench and A/B.
- mmvq: every format the tree and strata-bench both have, 1-8 columns (MMVQ_MAX_BATCH_SIZE); on the
  formats the built-ins have, judged by ggml's arithmetic (ggml/error.py), not bitwise against `old`;
  on the others (the K-quants, q4_0 .. q5_1) it is the cases' only variant, judged by the family's bound;
- dequant: bitwise gguf-py's float32, on every format both have;
- q8_1: bitwise strata-bench's quantization.
A second tree (`--ggml-b`, variant `ggml_b`) is held to the first's bits (Variant.same_as), case by case.
"""
from __future__ import annotations

from typing import Any, Mapping

from strata_bench.cases.family import Variant
from strata_bench.errors import InputError
from strata_bench.ggml import convert, mmvq
from strata_bench.ggml.build import source_build
from strata_bench.ggml.error import ZERO_SIGN_FORMATS, GgmlErrorModel, ZeroSignModel
from strata_bench.ggml.launch import checker, lookup_in, needs_packing, packed_rows
from strata_bench.ggml.tree import CONVERT, MMVQ, QUANTIZE, GgmlTree

FAMILIES = ("mmvq", "dequant", "q8_1")


def attach(families: Mapping[str, Any], tree: GgmlTree, name: str = "ggml", same_as: str | None = None) -> list[str]:
    """Add variant `name` from `tree` to the families it has kernels for; returns those families."""
    from strata_bench.formats import all_formats

    missing = [f for f in FAMILIES if f not in families]
    if missing:
        raise InputError(f"--ggml: the families {', '.join(missing)} are not loaded")
    known = set(all_formats())
    formats = tuple(f for f in tree.formats if f in known)
    _attach_mmvq(families["mmvq"], tree, name, formats, same_as)
    _attach_dequant(families["dequant"], tree, name, formats, same_as)
    _attach_q8_1(families["q8_1"], tree, name, same_as)
    return list(FAMILIES)


def _unit(tree: GgmlTree, source: str, name: str) -> str:
    return f"{tree.path(source)}@{name}"


def _attach_mmvq(family: Any, tree: GgmlTree, name: str, formats: tuple[str, ...], same_as: str | None) -> None:
    unit, key = _unit(tree, MMVQ, name), f"{name}_w"
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
    """mmvq.check_device for the device a device array is on (CuPy's compute_capability: "90", "121")."""
    cc = getattr(getattr(array, "device", None), "compute_capability", None)
    if isinstance(cc, str) and cc.isdigit():
        mmvq.check_device(int(cc[:-1]), int(cc[-1]))


def _attach_dequant(family: Any, tree: GgmlTree, name: str, formats: tuple[str, ...], same_as: str | None) -> None:
    unit, key = _unit(tree, CONVERT, name), f"{name}_w"
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
    unit = _unit(tree, QUANTIZE, name)
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
