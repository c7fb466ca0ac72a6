"""Wide 16-byte-store candidates of fp16deq, as a --cases file: a family whose variant table holds old, new
and one variant per candidate kernel (fp16deq's WideConfig), so the project's own parity and bench check
each one bitwise against old and time them all in one run.

    strata-bench parity --cases experiments/fp16deq_tune/cases.py --family fp16deq_tune
    strata-bench bench --cases experiments/fp16deq_tune/cases.py --family fp16deq_tune

A candidate launches its kernel where "new" would take vec16 for its format, and "new"'s kernel
everywhere else (the generic kernel on unaligned cases, vec16 for the other format). The parity cases are
the family's own (edge data, row slices, padded and unaligned rows, the fixture) plus shapes of 3 and 7
blocks, where the strided mappings' last warp is partly empty. The winner goes into "new" by hand
(families/fp16deq.py's VEC16_WIDE). The candidates compile from this folder's kernels/fp16deq_wide.cu: the
built-in fp16deq.cu with the prmt lookup and the wide Q8_0 kernel, which "new" never runs. Only the public
kit is used.
"""
from __future__ import annotations

from pathlib import Path

from strata_bench.kit import Variant, builtin_family, extend_builtin

Fp16Deq = builtin_family("fp16deq")
KERNELS = Path(__file__).resolve().parent / "kernels"
OWN_SOURCE = "fp16deq_wide.cu"  # in KERNELS
_W = Fp16Deq.WideConfig
CANDIDATES = [
    # IQ4_XS: OUT = 8 with the register table isolates the cost of vec16's shared table and barrier.
    _W("iq4_xs", 8, "own", "prmt"),
    _W("iq4_xs", 16, "own", "shared"), _W("iq4_xs", 16, "own", "prmt"),
    _W("iq4_xs", 32, "own", "shared"), _W("iq4_xs", 32, "own", "prmt"),
    _W("iq4_xs", 16, "strided", "shared"), _W("iq4_xs", 16, "strided", "prmt"),
    _W("iq4_xs", 32, "strided", "prmt"),
    _W("q8_0", 16), _W("q8_0", 32),
]


def candidate(config) -> Variant:
    """"new" with `config`'s kernel in place of vec16 for its format: new's kernels from the built-in source,
    the candidate's from this folder's (unless new compiles it already: a launch gets it from there)."""
    def kernels(family, source: str) -> list[str]:
        if source == OWN_SOURCE:
            return [] if config.kernel in family.new_kernels(Fp16Deq.sources[0]) else [config.kernel]
        return family.new_kernels(source)

    def launch(family, case, kernels_, dev, outs, stream=None) -> None:
        family.launch_wide(case, config.label, config, kernels_, dev, outs, stream)

    return Variant(config.label, kernels, launch, f"fp16deq new with {config.kernel} for {config.fmt}")


class Fp16DeqTune(extend_builtin("fp16deq", OWN_SOURCE, KERNELS, [candidate(c) for c in CANDIDATES])):
    name = "fp16deq_tune"
    description = "fp16deq wide 16-byte-store candidates (experiments/fp16deq_tune)"

    def default_cases(self):
        extra = [self.path_case(fmt, rows, cols, "seed:7", Fp16Deq.VEC16)
                 for fmt in ("q8_0", "iq4_xs") for rows, cols in ((3, 256), (7, 256))]
        return [*super().default_cases(), *extra]
