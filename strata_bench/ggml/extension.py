"""`--ggml PATH` and `--ggml-b PATH` as one extension of a run (cases/spec.Extension): llama.cpp's own kernels
join the mmvq, dequant, q8_1, fp16deq, grouped, swiglu_q8 and moe_combine families of that run's catalog as
variants `ggml` and `ggml_b`, and its prompt GEMM (mul_mat_q) adds family mmq to that catalog and, with
expert ids, joins pfgemm."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import click

from strata_bench.errors import InputError
from strata_bench.files import UserPath

MAX_COLUMNS = 8  # ggml's MMVQ_MAX_BATCH_SIZE: above it ggml calls another kernel
# Cases ggml has no kernel for, said in one line where a run selects them: they run the built-ins alone.
# (family, its formats concerned or None for all, the line). This project's q2_0 is not upstream's Q2_0
# (FORMATS.md): q2warp is all q2_0, pfgemm's other formats are ggml's mul_mat_q's.
SAME_NAME_OTHER_FORMAT = "(ggml's Q2_0, type 42, is another format than this project's q2_0)"
NO_COUNTERPART = (
    ("q2warp", None, f"q2warp has no ggml counterpart {SAME_NAME_OTHER_FORMAT}: its cases run the built-ins alone"),
    ("pfgemm", ("q2_0",), f"pfgemm's q2_0 cases have no ggml counterpart {SAME_NAME_OTHER_FORMAT}: they run the "
                          "built-ins alone"),
)


@dataclass(frozen=True)
class Ggml:
    tree: str
    tree_b: str | None = None

    options: ClassVar[tuple[Any, ...]] = (
        click.option("--ggml", "ggml_tree", type=UserPath(), metavar="PATH",
                     help="A ggml tree (llama.cpp's ggml/ folder, or the checkout): its mat-vec (plain and MoE), "
                          "dequantization, q8_1, to-FP16, SwiGLU and MoE-combine kernels, built unchanged (nvcc, else "
                          "NVRTC), join mmvq, dequant, q8_1, fp16deq, grouped, swiglu_q8 and moe_combine as variant "
                          "ggml; its mul_mat_q adds family mmq and, with expert ids, joins pfgemm."),
        click.option("--ggml-b", "ggml_b_tree", type=UserPath(), metavar="PATH",
                     help="With --ggml: a second ggml tree (your branch), variant ggml_b, held bitwise to ggml."),
    )
    order: ClassVar[int] = 20
    adds_variants: ClassVar[bool] = True

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "Ggml | None":
        tree, tree_b = params.get("ggml_tree"), params.get("ggml_b_tree")
        if tree_b is not None and tree is None:
            raise InputError(f"--ggml-b {tree_b} needs --ggml PATH, the tree it is held to")
        return None if tree is None else cls(tree, tree_b)

    def check(self, spec: Any) -> None:
        cols = spec.request.cols
        if cols and max(cols) > MAX_COLUMNS:
            raise InputError(f"--cols {max(cols)}: ggml's mul_mat_vec_q takes 1 to {MAX_COLUMNS} columns "
                             f"(MMVQ_MAX_BATCH_SIZE; above it ggml uses another kernel)")

    def attach(self, catalog: dict, spec: Any) -> None:
        from strata_bench.ggml import load

        lacking = load(catalog, self.tree, self.tree_b, spec.filter.formats)
        _refuse_or_say(lacking, spec.filter.families)
        for family, formats, line in NO_COUNTERPART:
            if family in catalog and _selects(spec.filter, family, formats):
                print(f"--ggml: {line}", file=sys.stderr)

    def argv(self) -> list[str]:
        return ["--ggml", self.tree] + ([] if self.tree_b is None else ["--ggml-b", self.tree_b])

    def provenance(self) -> dict[str, Any]:
        """The trees, and the variants that are llama.cpp's (a report's peer, not this project's kernels): each
        tree's, and its multi-token MoE mat-vec's in grouped (`<name>_moe`)."""
        trees = {"ggml": self.tree, **({} if self.tree_b is None else {"ggml_b": self.tree_b})}
        return {"trees": trees, "foreign_variants": [*trees, *(f"{name}_moe" for name in trees)]}


def _selects(selection: Any, family: str, formats: tuple[str, ...] | None) -> bool:
    """Whether a run's filter may select `family`'s cases of `formats` (None: any of its formats)."""
    if selection.families and family not in selection.families:
        return False
    return formats is None or not selection.formats or any(f in selection.formats for f in formats)


def _refuse_or_say(lacking: Mapping[str, str], families: tuple[str, ...]) -> None:
    """A family a tree has no kernel for: InputError where --family names it (its variant was asked for),
    else one line on stderr, and its cases run without that tree's variant (a family not selected says
    nothing)."""
    for family, line in lacking.items():
        if family in families:
            raise InputError(f"{line}: {family} needs it")
        if not families:
            print(f"{line}: {family} needs it, so {family} runs without this tree", file=sys.stderr)


EXTENSION = Ggml
