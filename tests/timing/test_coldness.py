"""The cold check's arithmetic and schedule, without a GPU."""
from __future__ import annotations

import pytest

from strata_bench.timing.coldness import COLD, LARGER_THAN_L2, WARM, judge, replay_pairs

MiB = 1 << 20


def test_a_first_replay_clearly_slower_is_cold():
    check = judge([20e-6, 21e-6, 20.5e-6] * 8, [10e-6, 10.2e-6, 10.1e-6] * 8, 16 * MiB, 60 * MiB)
    assert check.verdict == COLD and check.flag() == ""
    assert (check.first_us, check.again_us, check.pairs) == (20.5, pytest.approx(10.1), 24)


def test_no_gain_on_a_copy_that_fits_is_warm_and_flagged():
    """The shared-weights bug: every copy's first replay found the weights another copy had just read."""
    check = judge([10.1e-6, 10e-6, 10.2e-6] * 8, [10e-6, 10.1e-6, 10.1e-6] * 8, 16 * MiB, 60 * MiB)
    assert check.verdict == WARM
    assert check.flag() == ("warm: a copy's first replay (10.10 us) was not slower than its immediate re-replay "
                            "(10.10 us) over 24 pairs: the L2 may have served the timed reads")


def test_no_gain_on_a_copy_larger_than_the_l2_is_cold_and_says_why():
    check = judge([300e-6] * 24, [300e-6] * 24, 1 << 30, 60 * MiB)
    assert check.verdict == LARGER_THAN_L2 and check.flag() == ""


def test_a_gain_within_noise_is_not_cold():
    # differences alternate -2..+3 us around a median gain of 0.5 us: within 3 standard errors
    first = [12e-6, 8e-6] * 12
    again = [9e-6, 10e-6] * 12
    check = judge(first, again, MiB, 60 * MiB)
    assert check.gain_us == pytest.approx(0.5) and check.verdict == WARM


def test_replay_pairs_replays_each_copy_twice_in_a_row_until_enough_pairs():
    calls = []
    replays = [lambda k=k: calls.append(k) or float(k) for k in range(5)]
    first, again = replay_pairs(replays, min_pairs=12)
    assert calls == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4] * 3  # 3 rounds of 5 copies: 15 pairs >= 12
    assert first == again == [0.0, 1.0, 2.0, 3.0, 4.0] * 3


@pytest.mark.gpu
def test_on_the_device_own_copies_measure_cold_and_one_shared_weight_buffer_measures_warm(monkeypatch):
    """mmvq iq2_xs 4096x14336 at one column: 16.2 MiB of weights per copy against the H200's 60 MiB L2.
    With a buffer per copy the first replays are slower than the re-replays; with the one weight buffer
    every copy shared before (mmvq's device cache) they are not, and the check says warm."""
    import cupy

    from strata_bench.families import load_builtin_families
    from strata_bench.kernels.build import load_kernels
    from strata_bench.timing import coldness, graph

    family = load_builtin_families()["mmvq"]
    case = family.case("iq2_xs", 4096, 14336, 1, "seed:1")
    kernels = load_kernels(family, 0)
    l2 = cupy.cuda.runtime.getDeviceProperties(0)["l2CacheSize"]
    host = family.make_inputs(case)
    own = graph.prepare_copies(family, case, host, hot=False, l2_bytes=l2)
    cold = coldness.measure(family, case, "new", kernels, own, cupy.cuda.Stream(non_blocking=True))
    monkeypatch.setattr(graph, "own_buffers", lambda arrays, taken, what: dict(arrays))
    shared = graph.prepare_copies(family, case, host, hot=False, l2_bytes=l2)
    assert len({d["w"].data.ptr for d in shared.devs}) == 1 < len(shared.devs)
    warm = coldness.measure(family, case, "new", kernels, shared, cupy.cuda.Stream(non_blocking=True))
    print(f"\nown copies: {cold.to_dict()}\nshared weights: {warm.to_dict()}")
    assert (cold.verdict, warm.verdict) == (coldness.COLD, coldness.WARM)
