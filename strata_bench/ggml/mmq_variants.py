"""A ggml tree's mul_mat_q as variants (`--ggml`, `--ggml-b`), one mechanism for both of its callers:

- family mmq (mmq_family.py), added to the run's catalog: ggml_cuda_mul_mat_q without ids (mmq.dense_args);
- pfgemm's variant: ggml_cuda_mul_mat_q with expert ids (MUL_MAT_ID, mmid.py: mmid.cu's helper, the gathered
  quantization, mul_mat_q over the experts as channels), on pfgemm's formats that ggml's mul_mat_q takes
  (iq2_s, iq4_nl; this project's q2_0 is not ggml's Q2_0), judged by mmq_error.MmidErrorModel.
Each builds quantize.cu's quantize_mmq_q8_1, the selected formats' own template instances (one source each:
only the instances of the run's --format; all of the variant's formats where none is given) and, with ids,
mmid.cu. The tile config, stream-k grid and buffers come from the tree's table on the device (mmq.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Mapping

from strata_bench.cases.family import Variant
from strata_bench.ggml import mmid, mmq
from strata_bench.ggml.build import source_build, source_unit
from strata_bench.ggml.launch import checker, compute_capability, lookup_in, packed_rows
from strata_bench.ggml.tree import QUANTIZE, GgmlTree

PFGEMM = "pfgemm"
PFGEMM_FORMATS = ("iq2_s", "iq4_nl")  # pfgemm's formats whose mul_mat_q ggml has (q2_0: another format)
BUFFERS = ("ids", "ids_src1", "ids_dst", "bounds", "xq", "tmp", "x")  # what a pfgemm launch reads besides w


def attach(catalog: dict, tree: GgmlTree, name: str, same_as: str | None, formats: tuple[str, ...],
           skip: Collection[str] = ()) -> dict[str, str]:
    """Family mmq and pfgemm's variant from `tree` (not for the families in `skip`: the tree the variant would
    be held to could not give them theirs); family -> why the tree cannot, for those it cannot give (the
    other still gets its variant). pfgemm is attached only where the run's catalog has it. A tree an error
    model judges (same_as None) must give each format the dot its model bounds (mmq_dots.lacking); a tree held
    to another's bits needs only the kernels."""
    from strata_bench.ggml import mmq_dots, mmq_family

    def bounded(lacking: Any, family_formats: tuple[str, ...], lines: bool) -> Any:
        chosen = _chosen(family_formats, tree, formats)
        return lambda t: lacking(t) or (None if same_as else mmq_dots.lacking(t, chosen, lines))

    attachers = {"mmq": (bounded(mmq.lacking, mmq_family.FORMATS, True),
                         lambda: attach_mmq(catalog, tree, name, same_as, formats))}
    if PFGEMM in catalog:
        attachers[PFGEMM] = (bounded(mmid.lacking, PFGEMM_FORMATS, False),
                             lambda: attach_pfgemm(catalog[PFGEMM], tree, name, same_as, formats))
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
    """The tree's sources one mul_mat_q variant builds, each its own unit: quantize.cu, each format's template
    instance and, with ids, mmid.cu; `kernels` lists what each holds for the variant."""

    tree: GgmlTree
    name: str
    formats: tuple[str, ...]
    with_ids: bool

    @property
    def units(self) -> dict[str, str]:
        """source -> the variant's unit of it."""
        out = {QUANTIZE: source_unit(self.tree, QUANTIZE, f"{self.name}-mmq")}
        out.update({mmq.instance_source(f): source_unit(self.tree, mmq.instance_source(f), self.name)
                    for f in self.formats})
        if self.with_ids:
            out[mmid.SOURCE] = source_unit(self.tree, mmid.SOURCE, self.name)
        return out

    def kernels(self, table: Mapping[Any, mmq.Config], unit: str) -> list[str]:
        source = next((s for s, u in self.units.items() if u == unit), None)
        if source == QUANTIZE:
            return list(dict.fromkeys(mmq.quantize_name(f) for f in self.formats))
        if source == mmid.SOURCE:
            return [mmid.HELPER]
        fmt = next((f for f in self.formats if mmq.instance_source(f) == source), None)
        return [n for (f, _, _), c in table.items() if f == fmt for n in mmq.kernel_names(self.tree, c)]

    def add_to(self, family: Any, variant: Variant) -> None:
        label, check = f"--ggml variant {self.name!r}", checker(signature, self.name)
        (first, unit), *rest = self.units.items()
        family.add_variant(variant, unit, (), source_build(self.tree, first, label, check))
        for source, unit in rest:
            family.add_source(unit, (), source_build(self.tree, source, label, check))


def signature(expr: str) -> Any:
    """The parameters a launch of `expr` passes, by kernel (quantize_mmq_q8_1, the fixup, mm_ids_helper,
    mul_mat_q)."""
    for prefix, params in (("quantize_mmq_q8_1", mmq.QUANTIZE_SIGNATURE), (mmid.KERNEL, mmid.SIGNATURE),
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
    sources = Sources(tree, name, _chosen(mmq_family.FORMATS, tree, formats), with_ids=False)
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


def attach_pfgemm(family: Any, tree: GgmlTree, name: str = "ggml", same_as: str | None = None,
                  formats: tuple[str, ...] = ()) -> None:
    """pfgemm's variant `name`: ggml's MUL_MAT_ID on mul_mat_q (mmid.py) for the cases of PFGEMM_FORMATS the
    tree and the run's --format have; none where they have none (nothing to build)."""
    from strata_bench.ggml.mmq_error import MmidErrorModel

    chosen = _chosen(PFGEMM_FORMATS, tree, formats)
    if not chosen:
        return
    table = mmq.config_table(tree)
    sources = Sources(tree, name, chosen, with_ids=True)
    units, prefix = sources.units, f"{name}_mmid_"

    def prepare(fam: Any, case: Any, dev: Mapping[str, Any]) -> dict[str, Any]:
        _check_device(dev["x"])
        return {prefix + k: v for k, v in _pfgemm_buffers(table, case, dev).items()}

    def launch(fam: Any, case: Any, kernels_: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
               stream: Any = None) -> None:
        shape = experts_of(case)
        cfg, _ = geometry(table, case.fmt, shape.args())
        bufs = {k: dev[prefix + k] for k in BUFFERS}
        w = dev.get(prefix + "w", dev["w"])  # packed where a K tile reads past the last row
        for source, step in mmid.plan(tree, cfg, case.fmt, shape, sm_count(), w, bufs["x"], bufs, outs["y"]):
            step.run(lookup_in(kernels_, units[source]), stream)

    variant = Variant(name, lambda fam, src: sources.kernels(table, src), launch,
                      f"llama.cpp's mul_mat_q with expert ids (MUL_MAT_ID), ggml {tree.version}",
                      error_model=MmidErrorModel(chosen), formats=chosen, prepare=prepare, same_as=same_as)
    sources.add_to(family, variant)


def _pfgemm_buffers(table: Mapping[Any, mmq.Config], case: Any, dev: Mapping[str, Any]) -> dict[str, Any]:
    """What one pfgemm case's launch needs on the device besides the family's inputs: ggml's ids and its
    helper's outputs, the q8_1 and fixup buffers, the activations as float32 (ggml's src1 type) and, where
    a K tile reads past the last row, the experts packed with zero rows after them."""
    import cupy

    from strata_bench.families.pfgemm_groups import group_sizes
    from strata_bench.formats import get_format

    shape = experts_of(case)
    cfg, grid = geometry(table, case.fmt, shape.args())
    t, e = shape.tokens, shape.experts
    made = {"ids": cupy.asarray(mmid.expert_ids(group_sizes(case))),
            "ids_src1": cupy.zeros(t, dtype=cupy.int32), "ids_dst": cupy.zeros(mmid.ids_dst_ints(t), dtype=cupy.int32),
            "bounds": cupy.zeros(e + 1, dtype=cupy.int32),
            "xq": cupy.zeros(mmq.activation_bytes(shape.k, t, mmq.J_MAX), dtype=cupy.uint8),
            "tmp": cupy.zeros(max(1, mmq.fixup_floats(cfg, grid)), dtype=cupy.float32),
            "x": dev["x"].astype(cupy.float32)}
    readable, rows = mmid.readable_rows(cfg, shape), e * shape.rows
    if readable > rows:
        row_bytes = get_format(case.fmt).bytes_per_row(case.cols)  # pfgemm's rows are packed: no padding
        made["w"] = packed_rows(dev["w"], rows, row_bytes, row_bytes, readable)
    return made


def experts_of(case: Any) -> mmid.Experts:
    """A pfgemm case as ggml's MUL_MAT_ID sees it."""
    from strata_bench.families.pfgemm_groups import group_sizes

    return mmid.Experts(case.rows, case.cols, case.ncols, len(group_sizes(case)), _block_values(case.fmt))


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
