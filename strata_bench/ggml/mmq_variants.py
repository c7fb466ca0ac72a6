"""A ggml tree's mul_mat_q as variants (`--ggml`, `--ggml-b`): family mmq (mmq_family.py), added to the run's
catalog, with ggml_cuda_mul_mat_q without ids (mmq.dense_args). It builds quantize.cu's quantize_mmq_q8_1 and
the selected formats' own template instances (one source each: only the instances of the run's --format; all
of the family's where none is given). The tile config, stream-k grid and buffers come from the tree's table
on the device (mmq.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Mapping

from strata_bench.cases.family import Variant
from strata_bench.ggml import mmq
from strata_bench.ggml.build import source_build, source_unit
from strata_bench.ggml.launch import checker, compute_capability, lookup_in
from strata_bench.ggml.tree import QUANTIZE, GgmlTree



def attach(catalog: dict, tree: GgmlTree, name: str, same_as: str | None, formats: tuple[str, ...],
           skip: Collection[str] = ()) -> dict[str, str]:
    """Family mmq from `tree` (not where `skip` names it: the tree the variant would be held to could not give
    it one); family -> why the tree cannot, where it cannot."""
    attachers = {"mmq": (mmq.lacking, lambda: attach_mmq(catalog, tree, name, same_as, formats))}
    reasons = {}
    for family, (lacking, attach_one) in attachers.items():
        why = lacking(tree)
        if why is not None:
            reasons[family] = why
        elif family not in skip:
            attach_one()
    return reasons


@dataclass(frozen=True)
class Sources:
    """The tree's sources one mul_mat_q variant builds, each its own unit: quantize.cu and each format's
    template instance; `kernels` lists what each holds for the variant."""

    tree: GgmlTree
    name: str
    formats: tuple[str, ...]

    @property
    def units(self) -> dict[str, str]:
        """source -> the variant's unit of it."""
        out = {QUANTIZE: source_unit(self.tree, QUANTIZE, f"{self.name}-mmq")}
        out.update({mmq.instance_source(f): source_unit(self.tree, mmq.instance_source(f), self.name)
                    for f in self.formats})
        return out

    def kernels(self, table: Mapping[Any, mmq.Config], unit: str) -> list[str]:
        source = next((s for s, u in self.units.items() if u == unit), None)
        if source == QUANTIZE:
            return list(dict.fromkeys(mmq.quantize_name(f) for f in self.formats))
        fmt = next((f for f in self.formats if mmq.instance_source(f) == source), None)
        return [n for (f, _, _), c in table.items() if f == fmt for n in mmq.kernel_names(self.tree, c)]

    def add_to(self, family: Any, variant: Variant) -> None:
        label, check = f"--ggml variant {self.name!r}", checker(signature, self.name)
        (first, unit), *rest = self.units.items()
        family.add_variant(variant, unit, (), source_build(self.tree, first, label, check))
        for source, unit in rest:
            family.add_source(unit, (), source_build(self.tree, source, label, check))


def signature(expr: str) -> Any:
    """The parameters a launch of `expr` passes, by kernel (quantize_mmq_q8_1, the fixup, mul_mat_q)."""
    for prefix, params in (("quantize_mmq_q8_1", mmq.QUANTIZE_SIGNATURE),
                           ("mul_mat_q_stream_k_fixup", mmq.FIXUP_SIGNATURE)):
        if expr.startswith(prefix):
            return params
    return mmq.MAIN_SIGNATURE


def attach_mmq(catalog: dict, tree: GgmlTree, name: str = "ggml", same_as: str | None = None,
               formats: tuple[str, ...] = ()) -> None:
    """Family mmq (mmq_family.py), added to the run's catalog, with variant `name`: quantize_mmq_q8_1 and
    mul_mat_q from each selected format's own template instance, without ids."""
    from strata_bench.ggml import mmq_family

    family = catalog.get(mmq_family.FAMILY) or mmq_family.into(catalog)
    table = mmq.config_table(tree)
    sources = Sources(tree, name, _chosen(mmq_family.FORMATS, tree, formats))
    units, key = sources.units, f"{name}_mmq"

    def prepare(fam: Any, case: Any, dev: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        _check_device(dev["w"])
        cfg, grid = geometry(table, case.fmt, _dense(case))
        return {f"{key}_xq": cupy.zeros(mmq.activation_bytes(case.cols, case.ncols, mmq.J_MAX), dtype=cupy.uint8),
                f"{key}_tmp": cupy.zeros(max(1, mmq.fixup_floats(cfg, grid)), dtype=cupy.float32)}

    def launch(fam: Any, case: Any, kernels_: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
               stream: Any = None) -> None:
        args = _dense(case)
        cfg, _ = geometry(table, case.fmt, args)
        xq = dev[f"{key}_xq"]
        mmq.quantize_plan(case.fmt, case.cols, case.ncols, dev["x"], xq).run(lookup_in(kernels_, units[QUANTIZE]),
                                                                             stream)
        lookup = lookup_in(kernels_, units[mmq.instance_source(case.fmt)])
        for step in mmq.plan(tree, cfg, args, sm_count(), dev["w"], xq, outs["y"], dev[f"{key}_tmp"]):
            step.run(lookup, stream)

    variant = Variant(name, lambda fam, src: sources.kernels(table, src), launch,
                      f"llama.cpp's mul_mat_q (stream-k), ggml {tree.version}", formats=sources.formats,
                      prepare=prepare, same_as=same_as)
    sources.add_to(family, variant)


def geometry(table: Mapping[Any, mmq.Config], fmt: str, args: mmq.Args) -> tuple[mmq.Config, mmq.Grid]:
    """The config mul_mat_q_switch_J takes on the current device (J for ncols_max) and its stream-k grid."""
    from strata_bench.kernels.launch import shared_optin

    cfg = mmq.choose(table, fmt, args.rows, args.ncols_max, shared_optin())
    return cfg, mmq.stream_k_grid(cfg, args, sm_count())


def sm_count() -> int:
    """The current device's SMs (stream-k's grid: ggml's nsm)."""
    from strata_bench.kernels.launch import resident_sms

    return resident_sms()


def _check_device(array: Any) -> None:
    cc = compute_capability(array)
    if cc is not None:
        mmq.check_device(*cc)


def _chosen(family_formats: tuple[str, ...], tree: GgmlTree, formats: tuple[str, ...]) -> tuple[str, ...]:
    """The formats a variant runs: its family's that the tree has and the run's --format (if any) names."""
    return tuple(f for f in family_formats if f in tree.formats and (not formats or f in formats))


def _dense(case: Any) -> mmq.Args:
    return mmq.dense_args(case.rows, case.cols, case.ncols, _block_values(case.fmt))


def _block_values(fmt: str) -> int:
    from strata_bench.formats import get_format

    return get_format(fmt).block_size
