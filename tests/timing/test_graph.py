"""The timing core without a GPU: how many input copies cover the L2, how many launches a graph holds,
and what a capture enqueues (a fake family and a fake stream stand in for the device)."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.cases import Case, Family
from strata_bench.timing import graph
from strata_bench.timing.graph import (InputCopies, capture, launch_count, prepare_copies, rotation_copies,
                                       size_launches)

MiB = 1 << 20
CASE = Case("toy", "q8_0", rows=4, cols=32)


@pytest.mark.parametrize("per_copy, l2, hot, copies", [
    (17 * 10**6, 60 * MiB, False, 12),  # 3 x 60 MiB / 17 MB = 11.1 -> 12
    (90 * MiB, 60 * MiB, False, 2),  # one copy bigger than the L2 still needs a second for 3x
    (180 * MiB, 60 * MiB, False, 1),  # exactly 3x in one copy
    (1 * MiB, 60 * MiB, False, 64),  # 180 copies wanted, capped at 64
    (17 * 10**6, 60 * MiB, True, 1),  # hot: one copy, whatever the L2
    (1, 0, False, 1),  # no L2 reported: still one copy
])
def test_rotation_copies_cover_three_l2s(per_copy, l2, hot, copies):
    assert rotation_copies(per_copy, l2, hot) == copies


@pytest.mark.parametrize("one_launch_s, copies, target_s, floor, launches", [
    (10e-6, 1, 2e-3, 1, 200),  # 2 ms of 10 us launches
    (10e-6, 12, 2e-3, 1, 204),  # rounded up to whole rotations of 12 copies
    (1e-9, 1, 2e-3, 1, 2000),  # a too-fast probe is floored at 0.1 us, then capped at 2000 launches
    (0.0, 7, 2e-3, 1, 2002),  # the cap, rounded up to a multiple of 7
    (5e-3, 3, 2e-3, 1, 3),  # longer than the target: one launch per copy
    (50e-6, 11, 2e-3, 200, 209),  # kernel A/B's floor of 200 launches, then 19 rotations of 11
])
def test_size_launches(one_launch_s, copies, target_s, floor, launches):
    assert size_launches(one_launch_s, copies, target_s, floor) == launches


class _Toy(Family):
    # name left empty so it does not register in the global registry
    def __init__(self):
        self.uploads, self.launches = 0, []

    def default_cases(self): return []
    def name_expressions(self, source): return []
    def make_inputs(self, case): return {"w": np.zeros(1000, np.uint8)}
    def reference(self, case, host): return []

    def to_device(self, case, host):
        self.uploads += 1
        return {"w": np.array(host["w"]), "copy": self.uploads}

    def alloc_outputs(self, case, dev):
        return {"y": np.zeros(4, np.float32), "of": dev["copy"]}

    def launch(self, case, variant, kernels, dev, outs, stream=None):
        assert outs["of"] == dev["copy"]  # a launch writes its own copy's outputs
        self.launches.append((variant, dev["copy"], stream))


class _Stream:
    def __init__(self):
        self.events = []

    def begin_capture(self): self.events.append("begin")
    def end_capture(self):
        self.events.append("end")
        return "graph"


def test_prepare_copies_uploads_one_copy_per_rotation_slot_each_with_outputs():
    family = _Toy()
    prep = prepare_copies(family, CASE, family.make_inputs(CASE), hot=False, l2_bytes=2000)
    assert family.uploads == 6 and len(prep.devs) == len(prep.outs) == 6  # 3 x 2000 bytes / 1000 bytes
    assert prep.input_bytes == 1000  # "copy" is an int, not an array: it has no bytes
    assert [o["of"] for o in prep.outs] == [1, 2, 3, 4, 5, 6]
    hot = prepare_copies(_Toy(), CASE, family.make_inputs(CASE), hot=True, l2_bytes=2000)
    assert len(hot.devs) == 1


def test_capture_enqueues_the_launches_round_robin_over_the_copies_on_the_stream():
    family, stream = _Toy(), _Stream()
    prep = prepare_copies(family, CASE, family.make_inputs(CASE), hot=False, l2_bytes=1000)  # 3 copies
    assert capture(family, CASE, "new", None, prep, 7, stream) == "graph"
    assert stream.events == ["begin", "end"]
    assert family.launches == [("new", k, stream) for k in (1, 2, 3, 1, 2, 3, 1)]


def test_launch_count_probes_one_launch_per_copy_then_sizes(monkeypatch):
    family, stream = _Toy(), _Stream()
    prep = InputCopies([{"copy": 1}, {"copy": 2}], [{"of": 1}, {"of": 2}], 1000)
    monkeypatch.setattr(graph, "replay_seconds", lambda g, s: 2 * 25e-6)  # the probe: 2 launches in 50 us
    assert launch_count(family, CASE, "old", None, prep, stream) == 80  # 2 ms / 25 us
    assert launch_count(family, CASE, "old", None, prep, stream, floor=200) == 200
    assert family.launches == [("old", 1, stream), ("old", 2, stream)] * 2
