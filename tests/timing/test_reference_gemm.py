"""The cuBLAS reference GEMM pfgemm is measured against: fp16 weights rounded as the kernels round them,
the shares of a bench file's variants, and (on a GPU) its rate and its float64 error."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.cases import Case
from strata_bench.families import load_builtin_families
from strata_bench.families import pfgemm as pf

FAMILY = load_builtin_families()["pfgemm"]


def small_case(fmt: str, n: int, k: int, groups: str, seed: int = 3) -> Case:
    return FAMILY.expert_case(fmt, n, k, groups, f"seed:{seed}")


@pytest.mark.gpu
def test_cublas_reference_rate_is_positive_for_equal_and_uneven_groups():
    for groups in ("64x4", "5,0,70"):
        from strata_bench.timing.bench import TimingConfig
        from strata_bench.timing.reference_gemm import cublas_reference

        timing, _ = cublas_reference(FAMILY, small_case("iq4_nl", 256, 512, groups), TimingConfig(min_trials=3,
                                                                                                  budget_s=0.5))
        assert timing.median_us > 0 and timing.tflops > 0


def test_reference_fp16_weights_equal_the_kernels_rounding():
    from strata_bench.timing import reference_gemm as ref
    from strata_bench.data.synthetic import synthetic_weights

    for fmt in ("iq2_s", "iq4_nl", "q2_0"):
        raw = synthetic_weights(fmt, 9000, 512, 5)  # three chunks, the last partial
        got = ref.fp16_weights(fmt, raw, 512, workers=3)
        assert got.dtype == np.float16 and got.shape == (9000, 512)
        assert np.array_equal(got.view(np.uint16), pf._dequantize_fp16(fmt, raw).view(np.uint16))


def test_reference_shares_read_the_bench_records():
    from strata_bench.timing.reference_gemm import ReferenceTiming, kernel_shares

    timing = ReferenceTiming("pfgemm/x", "cublas-gemmex", (10.0, 12.0, 11.0), 100, 2 * 10**9, "graph")
    assert timing.median_us == 11.0 and timing.tflops == pytest.approx(2e9 / 11e-6 / 1e12)
    bench = [{"case": "pfgemm/x", "variant": "new", "status": "timed", "median_us": 22.0},
             {"case": "pfgemm/x", "variant": "old", "status": "parity failed", "median_us": 5.0},
             {"case": "pfgemm/y", "variant": "new", "status": "timed", "median_us": 1.0}]
    assert kernel_shares(timing, bench) == {"new_us": 22.0, "new_tflops": pytest.approx(2e9 / 22e-6 / 1e12),
                                            "new_share": 0.5}
    assert timing.to_record()["timing"] == "graph" and timing.to_record()["trials"] == 3


@pytest.mark.gpu
@pytest.mark.parametrize("groups", ["64x4", "5,0,70,16"])
def test_cublas_reference_equals_float64_within_fp16_tolerance(groups):
    from strata_bench.timing.reference_gemm import case_inputs, cublas_reference
    from strata_bench.timing.bench import TimingConfig

    case = small_case("iq4_nl", 256, 512, groups)
    inputs = case_inputs(FAMILY, case)
    timing, y = cublas_reference(FAMILY, case, TimingConfig(budget_s=0.2), inputs)
    host = FAMILY.make_inputs(case)
    want, bound = pf.pf_reference(case.fmt, host["w"], host["x"], host["offsets"], case.rows, case.cols)
    err = np.abs(y.get().astype(np.float64) - want)
    assert err.max() > 0 and (err <= bound).all() and bound.max() < 0.05 * np.abs(want).max()
    assert timing.tflops > 0 and timing.timing in ("graph", "events") and len(timing.samples_us) >= 10
