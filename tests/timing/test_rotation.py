"""Every rotated copy has its own weights, activations and outputs, in every built-in family: bench's
copies are made through each family's own to_device/alloc_outputs on a host stand-in for CuPy (numpy
arrays), and the recorded launches of a captured graph read and write only their own copy's buffers."""
from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest

from strata_bench.families import load_builtin_families
from strata_bench.errors import FamilyError
from strata_bench.timing.graph import capture, memory_span, own_buffers, prepare_copies
from tests.stub_kernels import RecordingKernels, stub_launch_helpers

FAMILIES = load_builtin_families()
BUILT_IN = ("dequant", "q8_1", "mmvq", "grouped", "q2warp", "pfgemm", "fp16deq", "swiglu_q8", "moe_combine")


def _host_cupy() -> SimpleNamespace:
    """What the families' to_device and alloc_outputs use of CuPy, on the host: asarray copies, as an
    upload does."""
    return SimpleNamespace(asarray=lambda a, dtype=None: np.array(a, dtype=dtype, copy=True), empty=np.empty,
                           zeros=np.zeros, uint8=np.uint8, int8=np.int8, uint16=np.uint16, uint32=np.uint32,
                           int32=np.int32, float16=np.float16, float32=np.float32,
                           cuda=SimpleNamespace(Device=lambda *a: SimpleNamespace(id=0)))


class _Stream:
    def begin_capture(self): pass
    def end_capture(self): return "graph"


def _smallest_case(family):
    return min(family.default_cases(), key=lambda c: (c.rows * c.cols * max(c.ncols, 1), c.name))


def _spans(arrays) -> list[tuple[int, int]]:
    return [s for s in map(memory_span, arrays.values()) if s is not None]


@pytest.fixture
def host_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _host_cupy())


@pytest.mark.parametrize("name", BUILT_IN)
def test_each_copy_owns_its_buffers(name, host_cupy, monkeypatch):
    family = FAMILIES[name]
    case = _smallest_case(family)
    host = family.make_inputs(case)
    first = family.to_device(case, host)
    per_copy = sum(int(getattr(a, "nbytes", 0)) for a in first.values())
    prep = prepare_copies(family, case, host, hot=False, l2_bytes=per_copy)  # 3 copies cover 3x this "L2"
    assert len(prep.devs) == 3
    owners = [(k, s) for k, copy in enumerate(prep.devs + prep.outs) for s in _spans(copy)]
    for i, (k, (a, b)) in enumerate(owners):
        clash = [j % 3 for j, (c, d) in owners[i + 1:] if j % 3 != k % 3 and a < d and c < b]
        assert not clash, f"{case.name}: copy {k % 3} shares memory with copy {clash[0]}"


def test_mmvq_launches_read_and_write_only_their_own_copy(host_cupy, monkeypatch):
    """mmvq caches its device weights per host array (parity uploads them once for every column count):
    before the rotation made each copy its own, all 12 copies of iq2_xs 4096x14336 read one buffer."""
    from strata_bench.families import mmvq as mmvq_mod
    from strata_bench.families import mmvq_mma

    stub_launch_helpers(monkeypatch, mmvq_mod, mmvq_mma)
    family = FAMILIES["mmvq"]
    case = _smallest_case(family)
    prep = prepare_copies(family, case, family.make_inputs(case), hot=False, l2_bytes=10**6)
    kernels = RecordingKernels()
    capture(family, case, "new", kernels, prep, 2 * len(prep.devs), _Stream())
    per_launch = len(kernels.calls) // (2 * len(prep.devs))
    for i, call in enumerate(kernels.calls):
        k = (i // per_launch) % len(prep.devs)
        mine = _spans(prep.devs[k]) + _spans(prep.outs[k])
        for arg in call[3]:
            span = memory_span(arg)
            if span is not None:
                assert any(a <= span[0] and span[1] <= b for a, b in mine), f"launch {i} ({call[0]}) left copy {k}"
    assert len({memory_span(d["w"]) for d in prep.devs}) == len(prep.devs)


def test_own_buffers_copies_a_shared_array_and_keeps_the_rest():
    w, x = np.zeros(64, np.uint8), np.zeros(8, np.float32)
    taken: list = []
    first = own_buffers({"w": w, "x": x, "n": 3}, taken, "toy")
    assert first["w"] is w and first["x"] is x and first["n"] == 3
    again = own_buffers({"w": w, "x": np.zeros(8, np.float32)}, taken, "toy")
    assert again["w"] is not w and np.array_equal(again["w"], w)
    assert memory_span(again["w"]) not in (memory_span(w),)
    assert len(taken) == 4


def test_own_buffers_copies_a_view_into_an_earlier_copy():
    base = np.zeros(64, np.uint8)
    taken: list = []
    own_buffers({"w": base}, taken, "toy")
    view = own_buffers({"w": base[16:32]}, taken, "toy")["w"]
    assert view.base is None and view.shape == (16,)


def test_own_buffers_refuses_two_aliased_arrays_shared_with_an_earlier_copy():
    y = np.zeros(16, np.float32)
    taken: list = []
    own_buffers({"y": y, "y_bits": y.view(np.uint32)}, taken, "toy outputs")  # aliasing within a copy is fine
    with pytest.raises(FamilyError, match="^toy outputs: 'y' and 'y_bits' alias each other and an earlier"):
        own_buffers({"y": y, "y_bits": y.view(np.uint32)}, taken, "toy outputs")


@pytest.mark.parametrize("array, span", [
    (np.zeros(4, np.float32), (0, 16)),
    (np.zeros((3, 4), np.uint8)[:, ::2], (0, 11)),  # rows of 4 bytes, every other byte: last at 2*4 + 2
    (np.zeros(5, np.uint16)[::-1], (-8, 2)),  # reversed: from the last element back to the first
    (np.zeros(0, np.uint8), None),
    (7, None),
])
def test_memory_span(array, span):
    got = memory_span(array)
    if span is None:
        assert got is None
    else:
        origin = array.__array_interface__["data"][0]
        assert (got[0] - origin, got[1] - origin) == span
