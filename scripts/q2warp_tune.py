"""Launch-tuning candidates of q2warp_new, as a --cases file: a family whose variants are old, new and one
per candidate config (q2warp.py's NewConfig), each checked bitwise against old before it is timed.

    strata-bench bench --cases scripts/q2warp_tune.py --family q2warp_tune --shape 131072x8192 --cols 1,2,3,4

A candidate launches its config for every column count. All compile without spills (ptxas -v, sm_90).
The winners go into families/q2warp.py's NEW_CONFIGS.
"""
from __future__ import annotations

from strata_bench.cases.family import Variant
from strata_bench.families.q2warp import NewConfig, Q2Warp

# (warps, min warps/SM, depth, early, sets)
CONFIGS = [NewConfig(w, m, d, e, s) for w, m, d, e, s in (
    (4, 0, 1, True, 1), (4, 0, 1, True, 4), (4, 24, 2, True, 1), (4, 24, 2, True, 4),
    (8, 24, 2, True, 2), (4, 24, 2, True, 8), (4, 0, 1, False, 4))]
# min warps applies at 1 column only (NewConfig.kernel); depth 2 at the default 32 warps spills at 1 column.


def candidate(config: NewConfig) -> Variant:
    def kernels(family, source: str) -> list[str]:
        return [config.kernel(n) for n in (1, 2, 3, 4)]

    def launch(family, case, kernels_, dev, outs, stream=None) -> None:
        family.launch_new_config(case, kernels_, dev, outs, config, stream)

    return Variant(config.label, kernels, launch, f"q2warp_new as {config}")


class Q2WarpTune(Q2Warp):
    name = "q2warp_tune"
    description = "q2warp_new launch candidates (scripts/q2warp_tune.py)"
    variants = (*Q2Warp.variants, *(candidate(c) for c in CONFIGS))

    def bench_cases(self):
        return [self.case("q2_0", 131072, 8192, n, "seed:1") for n in (1, 2, 3, 4)]


TUNE_FAMILIES = [Q2WarpTune]
