"""The one timing core, used by bench and by kernel A/B: input copies for cold weights, a CUDA graph of N
launches of one variant, one timed replay of it, and the launch count that makes a replay long enough.

A graph replays many launches for one CPU call, so Python's ~5-10 us launch cost is not timed. The
launches cycle through the input copies; with copies totalling at least 3x the L2, every launch reads
weights that are not in the L2 (nvbench-style cold cache).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from strata_bench.cases import Case, Family

L2_ROTATION_FACTOR = 3  # rotate through inputs of at least this many L2s (nvbench-style cold cache)
MAX_COPIES = 64  # device memory, not the L2, is the limit for tiny inputs
GRAPH_TARGET_S = 2e-3  # aim each replay at this long so event resolution (~0.5 us) does not matter
MAX_LAUNCHES = 2000  # launches in one graph at most: capture time and graph memory grow with it
MIN_LAUNCH_S = 1e-7  # the probed time of one launch is taken as at least this, so no probe sizes a huge graph


@dataclass(frozen=True)
class InputCopies:
    """Device copies of one case's inputs, each with its own outputs; launch i uses copy i % len(devs)."""

    devs: list[Mapping[str, Any]]
    outs: list[Mapping[str, Any]]
    input_bytes: int  # bytes of one copy
    # The copies together are at least 3x the L2 (not --hot, not capped short): each launch reads its
    # inputs from DRAM, so a time below bytes / read ceiling is impossible (timing/verify.py).
    cold: bool = True
    l2_bytes: int = 0  # the device's L2 (0: not known)

    @property
    def rotation_bytes(self) -> int:
        """Bytes of input the launches cycle through: copies x bytes per copy."""
        return len(self.devs) * self.input_bytes

    def rotation(self, hot: bool = False) -> dict[str, Any]:
        """What the record keeps to prove cold caches: copies x bytes per copy against the L2, and a
        warning when the rotation is below 3x the L2 (the 64-copy cap on small inputs), unless --hot."""
        multiple = self.rotation_bytes / self.l2_bytes if self.l2_bytes else None
        warm = not hot and multiple is not None and multiple < L2_ROTATION_FACTOR
        return {"copies": len(self.devs), "bytes_per_copy": self.input_bytes, "l2_bytes": self.l2_bytes,
                "l2_multiple": multiple, "hot": hot,
                "warning": (f"warm: rotation {len(self.devs)} x {self.input_bytes} B is {multiple:.2f}x the L2, "
                            f"below {L2_ROTATION_FACTOR}x") if warm else ""}


def rotation_copies(per_copy_bytes: int, l2_bytes: int, hot: bool) -> int:
    """How many input copies to rotate through: one when hot, else enough to cover 3x the L2 (at most 64)."""
    copies = 1 if hot else max(1, math.ceil(L2_ROTATION_FACTOR * l2_bytes / per_copy_bytes))
    return min(copies, MAX_COPIES)


def _nbytes(arrays: Mapping[str, Any]) -> int:
    return sum(int(getattr(a, "nbytes", 0)) for a in arrays.values())


def memory_span(array: Any) -> tuple[int, int] | None:
    """[first, last + 1) byte addresses an array's elements cover (CUDA or host), or None for a non-array
    or an empty one. Strides may be negative; the span is what the elements reach, not the allocation.
    A 0-d array or NumPy scalar is None too: kernels take those by value."""
    if not getattr(array, "ndim", 0):
        return None
    iface = getattr(array, "__cuda_array_interface__", None) or getattr(array, "__array_interface__", None)
    if not isinstance(iface, Mapping) or not getattr(array, "size", 0):
        return None
    start = end = int(iface["data"][0])
    for n, stride in zip(array.shape, array.strides):
        reach = (n - 1) * stride
        start, end = (start + reach, end) if reach < 0 else (start, end + reach)
    return start, end + array.itemsize


def _overlaps(span: tuple[int, int], taken: list[tuple[int, int]]) -> bool:
    return any(span[0] < b and a < span[1] for a, b in taken)


def own_buffers(arrays: Mapping[str, Any], taken: list[tuple[int, int]], what: str) -> dict[str, Any]:
    """`arrays` with every array that shares memory with an earlier copy (`taken`) replaced by a copy of
    its own, so a rotated copy never reads another copy's bytes (a family may cache its device weights
    for parity's sake: mmvq does). Two arrays of one copy that alias each other and an earlier copy
    cannot be separated without breaking their aliasing: FamilyError. Adds this copy's spans to `taken`."""
    from strata_bench.errors import FamilyError

    own, mine, shared = {}, [], []
    for name, arr in arrays.items():
        span = memory_span(arr)
        if span is not None and _overlaps(span, taken):
            shared.append((name, span))
            arr = arr.copy()
            span = memory_span(arr)
        own[name] = arr
        if span is not None:
            mine.append(span)
    for i, (name, span) in enumerate(shared):
        twin = [other for other, s in shared[i + 1:] if _overlaps(span, [s])]
        if twin:
            raise FamilyError(f"{what}: {name!r} and {twin[0]!r} alias each other and an earlier rotated copy; "
                              f"to_device/alloc_outputs must give each call its own buffers")
    taken.extend(mine)
    return own


def prepare_copies(family: Family, case: Case, host: Mapping[str, Any], hot: bool, l2_bytes: int) -> InputCopies:
    """Device copies of the host inputs (see `rotation_copies`), each with its outputs allocated, and no
    two copies sharing a byte (`own_buffers`): a shared weight buffer would stay in the L2 across the
    rotation and time warm weights as cold."""
    taken: list[tuple[int, int]] = []
    first = own_buffers(family.device_inputs(case, host), taken, f"{case.name} inputs")
    per_copy = max(_nbytes(first), 1)
    copies = rotation_copies(per_copy, l2_bytes, hot)
    devs = [first] + [own_buffers(family.device_inputs(case, host), taken, f"{case.name} inputs")
                      for _ in range(copies - 1)]
    outs = [own_buffers(family.alloc_outputs(case, d), taken, f"{case.name} outputs") for d in devs]
    return InputCopies(devs, outs, per_copy, cold=not hot and copies * per_copy >= L2_ROTATION_FACTOR * l2_bytes,
                       l2_bytes=l2_bytes)


def capture(family: Family, case: Case, variant: str, kernels: Any, prep: InputCopies, launches: int, stream):
    """A CUDA graph of `launches` launches of `variant` on `stream`, cycling through the input copies.

    Nothing runs while capturing: the family's launch must only enqueue work on the stream it is given.
    """
    stream.begin_capture()
    for i in range(launches):
        k = i % len(prep.devs)
        family.launch(case, variant, kernels, prep.devs[k], prep.outs[k], stream=stream)
    return stream.end_capture()


def replay_seconds(graph, stream) -> float:
    """Seconds of one replay of `graph` on `stream`, between CUDA events recorded on that stream."""
    import cupy

    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record(stream)
    graph.launch(stream)
    stop.record(stream)
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop) / 1e3


def size_launches(one_launch_s: float, copies: int, target_s: float = GRAPH_TARGET_S, floor: int = 1) -> int:
    """Launches per graph: enough for a replay of about `target_s` (at most MAX_LAUNCHES), at least `floor`
    and one per copy, rounded up to whole rotations so every copy is launched equally often."""
    launches = max(floor, copies, min(MAX_LAUNCHES, int(target_s / max(one_launch_s, MIN_LAUNCH_S))))
    return math.ceil(launches / copies) * copies


def probe_launch_seconds(family: Family, case: Case, variant: str, kernels: Any, prep: InputCopies,
                         stream) -> float:
    """Seconds of one launch, from one replay of a graph of one launch per copy."""
    probe = capture(family, case, variant, kernels, prep, len(prep.devs), stream)
    return replay_seconds(probe, stream) / len(prep.devs)


def launch_count(family: Family, case: Case, variant: str, kernels: Any, prep: InputCopies, stream,
                 target_s: float = GRAPH_TARGET_S, floor: int = 1) -> int:
    """The graph size for `variant`: probe one launch's time, then `size_launches`."""
    one = probe_launch_seconds(family, case, variant, kernels, prep, stream)
    return size_launches(one, len(prep.devs), target_s, floor)
