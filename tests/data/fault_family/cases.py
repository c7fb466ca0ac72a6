"""A user case file (the `--cases` API): one family, a passing case and a faulting one."""
import numpy as np

from strata_bench.cases import Case, Expected, Family


class FaultDemo(Family):
    name = "fault_demo"
    sources = ("fault.cu",)

    def default_cases(self):
        return [Case(self.name, "f32", rows=1, cols=1024, params=(("fault", 0),)),
                Case(self.name, "f32", rows=1, cols=1024, params=(("fault", 1),))]

    def name_expressions(self, source):
        return ["double_it"]

    def make_inputs(self, case):
        return {"x": np.random.default_rng(0).standard_normal(case.cols).astype(np.float32)}

    def to_device(self, case, host):
        import cupy
        return {"x": cupy.asarray(host["x"])}

    def alloc_outputs(self, case, dev):
        import cupy
        return {"y": cupy.empty(case.cols, dtype=cupy.float32)}

    def launch(self, case, variant, kernels, dev, outs, stream=None):
        n = case.cols
        kernels.get("double_it")(((n + 255) // 256,), (256,),
                                 (dev["x"], outs["y"], np.int32(n), np.int32(case.param("fault"))), stream=stream)

    def reference(self, case, host):
        return [Expected("y", 2.0 * host["x"].astype(np.float64), tol=0.0, why="doubling is exact")]
