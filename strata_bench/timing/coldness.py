"""Cold weights measured, not assumed: a rotation of copies totalling 3x the L2 should make every timed
launch read its inputs from DRAM, but a family that hands two copies one buffer (or a copy that the L2
keeps anyway) times warm weights while the record says cold. So per case, after the trials, each copy is
replayed alone twice in a row: its first replay comes after every other copy was read (cold, if the
rotation works), the second at once (as warm as that copy can be). Where a copy fits in the L2, the first
must be slower than the second beyond noise, or the case is flagged warm. A copy larger than the L2 cannot
be warm even when re-read at once; such a case is cold by the same measurement, and says why.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import numpy as np

MIN_PAIRS = 24  # first/again pairs per case: rounds over the copies until at least this many
Z_COLD = 3.0  # the median gain must exceed this many standard errors of the median
MIN_GAIN = 0.01  # ... and this fraction of the re-replay's time, so a sub-percent blip never counts

COLD, WARM, LARGER_THAN_L2 = "cold", "warm", "cold: one copy exceeds the L2"


@dataclass(frozen=True)
class ColdCheck:
    """A case's first-replay and immediate re-replay times per copy (us), and what they show."""

    first_us: float  # median over the pairs: a copy replayed after every other copy
    again_us: float  # median: the same copy replayed at once
    gain_us: float  # median of the paired differences first - again
    stderr_us: float  # standard error of that median (1.2533 x 1.4826 x MAD / sqrt(n))
    pairs: int
    copy_bytes: int
    l2_bytes: int

    @property
    def verdict(self) -> str:
        if self.gain_us > max(Z_COLD * self.stderr_us, MIN_GAIN * self.again_us):
            return COLD
        return LARGER_THAN_L2 if self.copy_bytes > self.l2_bytes > 0 else WARM

    def flag(self) -> str:
        """'' unless warm: then what the reader must know."""
        if self.verdict != WARM:
            return ""
        return (f"warm: a copy's first replay ({self.first_us:.2f} us) was not slower than its immediate "
                f"re-replay ({self.again_us:.2f} us) over {self.pairs} pairs: the L2 may have served the timed "
                f"reads")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "verdict": self.verdict}


def judge(first_s: Sequence[float], again_s: Sequence[float], copy_bytes: int, l2_bytes: int) -> ColdCheck:
    """The check from paired replay times in seconds (first[i] and again[i] are one copy, back to back)."""
    first, again = np.asarray(first_s) * 1e6, np.asarray(again_s) * 1e6
    diffs = first - again
    mad = float(np.median(np.abs(diffs - np.median(diffs))))
    stderr = 1.2533 * 1.4826 * mad / math.sqrt(len(diffs))
    return ColdCheck(float(np.median(first)), float(np.median(again)), float(np.median(diffs)), stderr,
                     len(diffs), copy_bytes, l2_bytes)


def replay_pairs(replays: Sequence[Callable[[], float]], min_pairs: int = MIN_PAIRS) -> tuple[list, list]:
    """Rounds over the copies' one-launch replays, copy by copy, each replayed twice in a row:
    (first times, again times), at least `min_pairs` of each."""
    rounds = max(1, math.ceil(min_pairs / len(replays)))
    first, again = [], []
    for _ in range(rounds):
        for replay in replays:
            first.append(replay())
            again.append(replay())
    return first, again


def measure(family, case, variant: str, kernels, prep, stream) -> ColdCheck:
    """The check of one case's rotation (`prep`, timing/graph.InputCopies) with `variant`'s launches."""
    from strata_bench.timing.graph import InputCopies, capture, replay_seconds

    replays = []
    with stream:
        for dev, outs in zip(prep.devs, prep.outs):
            one = InputCopies([dev], [outs], prep.input_bytes)
            graph = capture(family, case, variant, kernels, one, 1, stream)
            replays.append(lambda graph=graph: replay_seconds(graph, stream))
    first, again = replay_pairs(replays)
    return judge(first, again, prep.input_bytes, prep.l2_bytes)
