"""The authoring kit: every public name a family needs, in one import (the built-in families use the same).

    from strata_bench.kit import Family, Variant, Case, Expected, weights, padded, quantize_q8_1

The names live in their modules (cases/, data/, numerics/, kernels/launch.py); docs/EXTENDING.md
lists each one with a line on what it is for.
"""
from strata_bench.cases import Case, CaseFilter, Expected, Family, FixtureRef, Output, Variant, fixture_ref
from strata_bench.cases.abi import AbiArg, LaunchAbi, padded_row_args
from strata_bench.data.source import DataSource, parse_data
from strata_bench.data.weights import (ACT_SEED_OFFSET, FORMATS, OUTLIER, Q2_0_FIXTURE_SOURCE, ROW_ALIGN,
                                       TAIL_SLACK, activations, check_shape, chunks_per_row, padded, row_stride,
                                       traits, weights)
from strata_bench.errors import CheckFailed, InputError
from strata_bench.kernels.launch import (DEFAULT_SHARED_LIMIT, allow_dynamic_shared, ceil_div, decode_table_bytes,
                                         launch_quantize_q8_1, q8_1_staging_bytes, resident_blocks,
                                         compute_major, shared_optin)
from strata_bench.numerics.bounds import (FP16_MIN_NORMAL, U32, U64, fp16_half_ulp, gamma, q8_1_deviation,
                                          q8_1_value_error)
from strata_bench.numerics.matvec import MatvecRef, chain_depth, exact_weights, matvec_reference
from strata_bench.numerics.q8_1 import (Q8_1_BYTES, Q8_1_VALUES, butterfly_sum_f32, dequantize_q8_1, quantize_q8_1,
                                        roundf, unpack_q8_1)

__all__ = [
    # the contract
    "Case", "CaseFilter", "Expected", "Family", "Output", "Variant", "CheckFailed", "InputError",
    # real weights: a fixture as a family's fixture_cases hook sees it
    "FixtureRef", "fixture_ref",
    # the launch ABI a TOML variant follows (docs/ABI.md); a built-in family's class, to extend it
    "AbiArg", "LaunchAbi", "builtin_family", "padded_row_args",
    # data: where weights and activations come from, and their device layout
    "DataSource", "parse_data", "ACT_SEED_OFFSET", "FORMATS", "OUTLIER", "Q2_0_FIXTURE_SOURCE", "ROW_ALIGN",
    "TAIL_SLACK", "activations", "check_shape", "chunks_per_row", "padded", "row_stride", "traits", "weights",
    # launch helpers
    "DEFAULT_SHARED_LIMIT", "allow_dynamic_shared", "ceil_div", "decode_table_bytes", "launch_quantize_q8_1",
    "q8_1_staging_bytes", "resident_blocks", "compute_major", "shared_optin",
    # exact host arithmetic
    "Q8_1_BYTES", "Q8_1_VALUES", "butterfly_sum_f32", "dequantize_q8_1", "quantize_q8_1", "roundf", "unpack_q8_1",
    "FP16_MIN_NORMAL", "U32", "U64", "fp16_half_ulp", "gamma", "q8_1_deviation", "q8_1_value_error",
    "MatvecRef", "chain_depth", "exact_weights", "matvec_reference",
]


def builtin_family(name: str) -> type:
    """The class of the built-in family `name`, for a user family that extends it (a new variant next to
    the built-in ones): `class MyDequant(builtin_family("dequant")): name = "my_dequant"`. The built-ins are
    registered before a --cases file runs (runner/loop.py); a script of its own calls
    `strata_bench.families.load_builtin_families()` first. (The kit does not import the families: they
    are written against it.)"""
    from strata_bench.cases import FAMILIES as families

    if name not in families:
        raise InputError(f"no built-in family {name!r}; families: {', '.join(sorted(families))}")
    return type(families[name])
