"""The authoring kit: every public name a family needs, in one import (the built-in families use the same).

    from strata_bench.kit import Family, Variant, Case, Expected, weights, padded, quantize_q8_1

The names live in their modules (cases/, data/, numerics/, kernels/launch.py); docs/EXTENDING.md
lists each one with a line on what it is for.

A built-in family's class, `builtin_family(name)`, is public too: a family that extends it (a new variant
beside the built-in ones, examples/dequant_rows; an experiment, experiments/<name>/) subclasses it and may
use what FAMILY_SURFACE lists for it, and nothing whose name starts with "_" (`extend_builtin` makes the base
of such a family in one line, with its own kernel file beside the built-in sources):
- mmvq: `quantize_activations(case, kernels, dev, stream)` (q8_1 of every column, each variant's first
  launch), `launch_new_pass(case, kernels, dev, outs, col0, nc, config, stream)` (one column pass of
  mmvq_new as a NewConfig says), `launch_new_passes(case, kernels, dev, outs, config_of, stream)` (all of
  them, config_of(fmt, nc) -> NewConfig), `launch_mma_pass(config, case, kernels, dev, outs, col0, stream)`
  (one 8-column pass on the tensor cores as an MmaConfig says), `launch_onecol_pass(config, case, kernels, dev,
  outs, col0, stream)` (one one-column pass on mmvq_onecol as a OneColConfig says), `edge_and_fixture_cases(fmt,
  edge_ncols, fixture_ncols)`, `grid_cases(formats, shapes, ncols)`, and `NewConfig`, `new_config(fmt, nc)`,
  `column_passes(ncols)`, `Decoder`, `DECODERS`, `MmaConfig`, `OneColConfig`, `SHAPES`;
- fp16deq: `path_case(fmt, rows, cols, data, path, **params)`, `new_kernels(source)`,
  `launch_wide(case, variant, config, kernels, dev, outs, stream)` ("new"'s dispatch with a WideConfig's
  kernel in place of vec16), and `WideConfig`, `VEC16`, `GENERIC`.
Every built-in family also has the Family contract's public methods (cases/family.py).
"""
from typing import Any

from strata_bench.cases import Case, CaseFilter, Expected, Family, FixtureRef, Output, Variant, fixture_ref
from strata_bench.toml_abi.abi import AbiArg, LaunchAbi, padded_row_args
from strata_bench.data.source import DataSource, parse_data
from strata_bench.data.weights import (ACT_SEED_OFFSET, KERNEL_FORMATS, OUTLIER, Q2_0_FIXTURE_SOURCE, ROW_ALIGN,
                                       TAIL_SLACK, activations, check_shape, chunks_per_row, padded, row_stride,
                                       traits, weights)
from strata_bench.errors import CheckFailed, InputError
from strata_bench.kernels import constants
from strata_bench.kernels.launch import (DEFAULT_SHARED_LIMIT, allow_dynamic_shared, ceil_div, decode_table_bytes,
                                         launch_quantize_q8_1, q8_1_staging_bytes, resident_blocks,
                                         compute_major, shared_optin)
from strata_bench.numerics.bounds import (FP16_MIN_NORMAL, U32, U64, fp16_half_ulp, gamma, q8_1_deviation,
                                          q8_1_value_error)
from strata_bench.numerics.foreign_matvec import foreign_matvec_reference
from strata_bench.numerics.matvec import MatvecRef, chain_depth, exact_weights, matvec_reference
from strata_bench.numerics.q8_1 import (Q8_1_BYTES, Q8_1_VALUES, butterfly_sum_f32, dequantize_q8_1, quantize_q8_1,
                                        roundf, unpack_q8_1)

__all__ = [
    # the contract
    "Case", "CaseFilter", "Expected", "Family", "Output", "Variant", "CheckFailed", "InputError",
    # real weights: a fixture as a family's fixture_cases hook sees it
    "FixtureRef", "fixture_ref",
    # the launch ABI a TOML variant follows (docs/ABI.md); a built-in family's class, to extend it, and what
    # an extending family may use of it beyond the Family contract
    "AbiArg", "LaunchAbi", "builtin_family", "extend_builtin", "padded_row_args", "FAMILY_SURFACE",
    # data: where weights and activations come from, and their device layout
    "DataSource", "parse_data", "ACT_SEED_OFFSET", "KERNEL_FORMATS", "OUTLIER", "Q2_0_FIXTURE_SOURCE", "ROW_ALIGN",
    "TAIL_SLACK", "activations", "check_shape", "chunks_per_row", "padded", "row_stride", "traits", "weights",
    # the kernels' launch constants (kernels/constants.py, also generated into a CUDA header): constants.MMVQ_NEW_WARPS
    "constants",
    # launch helpers
    "DEFAULT_SHARED_LIMIT", "allow_dynamic_shared", "ceil_div", "decode_table_bytes", "launch_quantize_q8_1",
    "q8_1_staging_bytes", "resident_blocks", "compute_major", "shared_optin",
    # exact host arithmetic
    "Q8_1_BYTES", "Q8_1_VALUES", "butterfly_sum_f32", "dequantize_q8_1", "quantize_q8_1", "roundf", "unpack_q8_1",
    "FP16_MIN_NORMAL", "U32", "U64", "fp16_half_ulp", "gamma", "q8_1_deviation", "q8_1_value_error",
    "MatvecRef", "chain_depth", "exact_weights", "matvec_reference", "foreign_matvec_reference",
]


# What a family extending a built-in one may use of it beyond the Family contract (the module docstring
# says what each is; docs/EXTENDING.md, "Extending a built-in family"). tests/test_kit.py checks that each
# exists and that no experiment reaches for a private name.
FAMILY_SURFACE: dict[str, tuple[str, ...]] = {
    "mmvq": ("quantize_activations", "launch_new_pass", "launch_new_passes", "launch_mma_pass", "launch_onecol_pass",
             "edge_and_fixture_cases", "grid_cases", "NewConfig", "new_config", "column_passes", "Decoder", "DECODERS",
             "MmaConfig", "OneColConfig", "SHAPES"),
    "fp16deq": ("path_case", "new_kernels", "launch_wide", "WideConfig", "VEC16", "GENERIC"),
}


def builtin_family(name: str) -> type:
    """The class of the built-in family `name`, for a user family that extends it (a new variant next to
    the built-in ones): `class MyDequant(builtin_family("dequant")): name = "my_dequant"`. The built-ins are
    registered before a --cases file runs (gpu/loop.py); a script of its own calls
    `strata_bench.families.load_builtin_families()` first. (The kit does not import the families: they
    are written against it.)"""
    from strata_bench.cases import FAMILIES as families

    if name not in families:
        raise InputError(f"no built-in family {name!r}; families: {', '.join(sorted(families))}")
    return type(families[name])


def extend_builtin(name: str, source: str, root: Any, variants: Any) -> type:
    """The base of a family that extends the built-in `name` with `variants` compiled from `source` (a file
    under `root`, the extension's own kernels folder) beside the built-in sources:
    `class MmvqCoal(extend_builtin("mmvq", "mmvq_coal.cu", KERNELS, COAL_VARIANTS)): name = "mmvq_coal"`.
    The base registers nothing (its name is empty): the subclass names the family."""
    from pathlib import Path

    parent = builtin_family(name)
    members = {"name": "", "sources": (*parent.sources, source), "kernels_root": Path(root),
               "variants": (*parent.variants, *variants), "__module__": parent.__module__}
    return type(f"{parent.__name__}Extended", (parent,), members)
