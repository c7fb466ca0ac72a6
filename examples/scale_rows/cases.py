"""A user's own kernel family, written only against the public kit (`strata_bench.kit`):

    strata-bench parity --kernels examples/scale_rows --cases examples/scale_rows/cases.py --family scale_rows

y[r][c] = s[r] * x[r][c] in fp32, two variants (scale_rows.cu): "scalar" (one thread per element, the
baseline) and "vec4" (four per thread). Parity checks vec4 bit for bit against scalar and both against
the float64 product (one rounding: tolerance 2^-24 max|y|).
"""
import numpy as np

from strata_bench.kit import Expected, Family, InputError, Variant, ceil_div, parse_data

THREADS = 256


def scalar_kernels(family, source):
    return ["scale_rows_scalar"]


def vec4_kernels(family, source):
    return ["scale_rows_vec4"]


def launch_scalar(family, case, kernels, dev, outs, stream=None):
    """One thread per element."""
    kernels.get("scale_rows_scalar")((ceil_div(case.rows * case.cols, THREADS),), (THREADS,),
                                     (dev["x"], dev["s"], outs["y"], np.int32(case.rows), np.int32(case.cols)),
                                     stream=stream)


def launch_vec4(family, case, kernels, dev, outs, stream=None):
    """One thread per four elements (16-byte loads and stores)."""
    kernels.get("scale_rows_vec4")((ceil_div(case.rows * case.cols // 4, THREADS),), (THREADS,),
                                   (dev["x"], dev["s"], outs["y"], np.int32(case.rows), np.int32(case.cols)),
                                   stream=stream)


class ScaleRows(Family):
    name = "scale_rows"
    sources = ("scale_rows.cu",)
    description = "y = s[row] * x in fp32: one element per thread vs four, bitwise"
    variants = (
        Variant("scalar", scalar_kernels, launch_scalar, "one thread per element"),
        Variant("vec4", vec4_kernels, launch_vec4, "one thread per 4 elements"),
    )

    def default_cases(self):
        return [self.case("f32", rows, cols, 1, data) for rows, cols in ((1, 64), (37, 1000), (1024, 4096))
                for data in ("seed:1", "edge:2")]

    def make_inputs(self, case):
        if case.cols <= 0 or case.cols % 4:
            raise InputError(f"scale_rows: cols must be a positive multiple of 4, got {case.cols}")
        src = parse_data(case.data)
        if src.kind == "fixture":
            raise InputError("scale_rows: cases use seed:N or edge:N data")
        rng = np.random.default_rng(src.seed)
        x = rng.standard_normal((case.rows, case.cols), dtype=np.float32)
        s = rng.uniform(0.5, 2.0, case.rows).astype(np.float32)
        if src.edge:  # zeros of both signs, a product below fp32's smallest normal, a large value
            x[0, :4] = [0.0, -0.0, 1.5e-38, 65504.0]
            s[0] = np.float32(0.5)
        return {"x": x, "s": s}

    def to_device(self, case, host):
        import cupy

        return {"x": cupy.asarray(host["x"]), "s": cupy.asarray(host["s"])}

    def alloc_outputs(self, case, dev):
        import cupy

        return {"y": cupy.empty((case.rows, case.cols), dtype=cupy.float32)}

    def reference(self, case, host):
        ref = host["s"].astype(np.float64)[:, None] * host["x"].astype(np.float64)  # exact in float64
        return [Expected("y", ref, 2.0 ** -24 * float(np.abs(ref).max()), label="f64",
                         why="one fp32 rounding of an exact product: half an ulp, 2^-24 max|y|")]

    def describe_index(self, case, output, index):
        row, col = index
        return f"row {row}, column {col}"

    def bytes_moved(self, case):
        return case.rows * case.cols * 8 + case.rows * 4
