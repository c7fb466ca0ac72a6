"""A test family (the `--cases` API) whose variant "lazy" does its work only on its first launches:

    strata-bench bench --kernels tests/data/lazy_family --cases tests/data/lazy_family/cases.py --family lazy_demo

y = 2 * x in fp32. "honest" (the baseline) writes y on every launch; "lazy" (lazy.cu) on its first
HONEST_LAUNCHES launches in the process only, so it passes parity and bench's check step and then times
launches that return at once. bench and kernel ab must reject it: timed output differs, exit 1.
"""
import numpy as np

from strata_bench.kit import Expected, Family, Variant, ceil_div

THREADS = 256
HONEST_LAUNCHES = 4


def launch_honest(family, case, kernels, dev, outs, stream=None):
    n = case.cols
    kernels.get("double_all")((ceil_div(n, THREADS),), (THREADS,), (dev["x"], outs["y"], np.int32(n)),
                              stream=stream)


def launch_lazy(family, case, kernels, dev, outs, stream=None):
    n = case.cols
    kernels.get("double_lazy")((ceil_div(n, THREADS),), (THREADS,),
                               (dev["x"], outs["y"], np.int32(n), np.uint32(HONEST_LAUNCHES)), stream=stream)


class LazyDemo(Family):
    name = "lazy_demo"
    sources = ("lazy.cu",)
    description = "y = 2x; 'lazy' works only on its first launches (caught by the timed-output check)"
    variants = (
        Variant("honest", lambda family, source: ["double_all"], launch_honest, "every launch"),
        Variant("lazy", lambda family, source: ["double_lazy"], launch_lazy, "its first launches only"),
    )

    def default_cases(self):
        return [self.case("f32", 1, 1 << 20)]

    def make_inputs(self, case):
        return {"x": np.random.default_rng(0).standard_normal(case.cols).astype(np.float32)}

    def to_device(self, case, host):
        import cupy

        return {"x": cupy.asarray(host["x"])}

    def alloc_outputs(self, case, dev):
        import cupy

        return {"y": cupy.empty(case.cols, dtype=cupy.float32)}

    def reference(self, case, host):
        return [Expected("y", 2.0 * host["x"].astype(np.float64), tol=0.0, why="doubling is exact")]

    def bytes_moved(self, case):
        return case.cols * 8
