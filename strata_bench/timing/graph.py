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


def prepare_copies(family: Family, case: Case, host: Mapping[str, Any], hot: bool, l2_bytes: int) -> InputCopies:
    """Device copies of the host inputs (see `rotation_copies`), each with its outputs allocated."""
    first = family.to_device(case, host)
    per_copy = max(_nbytes(first), 1)
    copies = rotation_copies(per_copy, l2_bytes, hot)
    devs = [first] + [family.to_device(case, host) for _ in range(copies - 1)]
    outs = [family.alloc_outputs(case, d) for d in devs]
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
