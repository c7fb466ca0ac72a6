"""Timed outputs checked: what the timed replays wrote must be what the check step saw, and no time may
beat the roofline.

A variant that does its work only when it is checked (its launches after the first few return at once)
passes a check of one launch and is then timed as a huge win. So before the timed replays every output
buffer of every rotated input copy is poisoned (0xFF bytes: NaN for floats), and after them each copy's
outputs must equal, bit for bit, the checked result: the same variant's outputs in the check step (every
output, also where a family compares none between variants, as pfgemm's tensor-core sums). The check step
fills its outputs with the same 0xFF, so elements a kernel never writes (padding) agree.
Poisoning and comparing happen outside the CUDA events: the same kernels, launches and bytes are timed.

A time below bytes_moved / read ceiling (more than ROOFLINE_SLACK), or below bytes / theoretical peak, is
impossible for a kernel that reads its bytes from DRAM; it is reported as such, never as a speedup. Only
cold timings are held to it (the copies cover 3x the L2, InputCopies.cold): with --hot, or copies capped
short, the L2 may serve the reads. A time between the two (above a ceiling, within the slack) is flagged
("above the measured ceiling") and its fraction is shown as ">100%", never as a figure.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from strata_bench.cases import Case, Family
from strata_bench.checks.diagnosis import diagnose
from strata_bench.timing.ceilings import Ceilings
from strata_bench.timing.graph import InputCopies
from strata_bench.timing.status import BenchStatus, TimingStatus

POISON = 0xFF
TIMED_OUTPUT_DIFFERS = BenchStatus.OUTPUT_DIFFERS.value  # the record's text begins with these
IMPOSSIBLE = BenchStatus.IMPOSSIBLE.value
# The read ceiling is the best of a tuned sweep (timing/ceilings.py), re-measured once when beaten. The
# slack covers the noise of the two figures compared: a bench median's 95% CI (1% by default, --rel-ci)
# and the ceiling's own pass-to-pass spread (about 1% expected; the GPU test tests/timing/test_ceilings_gpu
# measures it and fails above 1.5%). 3% is about twice their sum, and still below the H200's theoretical
# peak (4.81 TB/s is 3.6% above the 4.64 TB/s a tuned kernel reaches), which bounds every time on its own.
ROOFLINE_SLACK = 0.03


def poison_outputs(prep: InputCopies) -> None:
    """Fill every output buffer of every copy with 0xFF bytes (on the current stream)."""
    import cupy

    for outs in prep.outs:
        for arr in outs.values():
            arr.view(cupy.uint8).fill(POISON)


def _host(a: Any) -> np.ndarray:
    return a.get() if hasattr(a, "get") else np.asarray(a)


def timed_output_problem(family: Family, case: Case, variant: str, prep: InputCopies,
                         checked: Mapping[str, Any], copies: int | None = None) -> TimingStatus | None:
    """None when every copy's outputs equal `checked` bitwise, else the "timed output differs" status
    naming the copy and, from checks/diagnosis.py, the first (and worst) differing element. `copies`
    limits the check to the first copies (those the timed graph launched)."""
    import cupy

    cupy.cuda.runtime.deviceSynchronize()
    used = prep.outs[:len(prep.outs) if copies is None else copies]
    for k, outs in enumerate(used):
        for name in checked:
            want, got = checked[name], outs[name]
            if bool(cupy.array_equal(want.view(cupy.uint8), got.view(cupy.uint8))):
                continue
            detail = diagnose(family, case, name, _host(want), _host(got), "checked", "timed")
            return TimingStatus(BenchStatus.OUTPUT_DIFFERS, f"{variant} copy {k} of {len(prep.outs)}: {detail}")
    return None


def roofline_seconds(bytes_moved: int, ceilings: Ceilings) -> float:
    """The least time a kernel that moves `bytes_moved` bytes can take at the measured read ceiling."""
    return bytes_moved / ceilings.read_bps


def roofline_problem(variant: str, seconds: float, bytes_moved: int, ceilings: Ceilings) -> TimingStatus | None:
    """None when `seconds` per call is possible, else the "impossible" status with the fraction of the ceiling:
    faster than the read ceiling by more than ROOFLINE_SLACK, or faster than the theoretical peak."""
    floor = roofline_seconds(bytes_moved, ceilings)
    if not (bytes_moved > 0 and seconds > 0 and ceilings.read_bps > 0):
        return None
    peak = ceilings.peak_bps
    beats_peak = math.isfinite(peak) and peak >= ceilings.read_bps and bytes_moved / seconds > peak
    if seconds * (1 + ROOFLINE_SLACK) >= floor and not beats_peak:
        return None
    also = f", above the theoretical peak {peak / 1e12:.2f} TB/s" if beats_peak else ""
    return TimingStatus(BenchStatus.IMPOSSIBLE,
                  f"{variant} at {seconds * 1e6:.3f} us moves {bytes_moved} bytes at {floor / seconds:.0%} of the "
                  f"measured read ceiling ({ceilings.read_bps / 1e12:.2f} TB/s, least {floor * 1e6:.3f} us{also})")


def above_ceiling(bytes_moved: int, seconds: float, ceilings: Ceilings, bound: str | None = "read") -> str:
    """'' when bytes / seconds is within the measured ceiling that bounds the kernel (`bound`: "read" or
    "copy"; None: none does), else 'above the measured read ceiling (re-measured)': a fraction over 100% is
    not a measurement. A ceiling that does not bound the kernel says nothing (a mat-vec that reads 1.14 GB
    and writes 0.5 MB is not bounded by the copy ceiling, which counts written bytes too)."""
    if not (bytes_moved > 0 and seconds > 0) or bound is None:
        return ""
    if not 0 < getattr(ceilings, f"{bound}_bps") < bytes_moved / seconds:
        return ""
    again = " (re-measured)" if ceilings.source == "re-measured" else ""
    return f"above the measured {bound} ceiling{again}"


def sensitivity_text(rel: float, trials: Sequence[int]) -> str:
    """'could see >= 0.4% (40 + 38 trials)': the smallest relative change the data could detect."""
    counts = " + ".join(str(n) for n in trials)
    noun = "trial" if sum(trials) == 1 else "trials"
    if rel is None or not math.isfinite(rel):
        return f"sensitivity unknown ({counts} {noun}, too few for a CI)"
    return f"could see >= {100 * rel:.1f}% ({counts} {noun})"
