"""Timed outputs checked: what the timed replays wrote must be what the check step saw, and no time may
beat the roofline.

A variant that does its work only when it is checked (its launches after the first few return at once)
passes a check of one launch and is then timed as a huge win. So before the timed replays every output
buffer of every rotated input copy is poisoned (0xFF bytes: NaN for floats), and after them each copy's
outputs must equal, bit for bit, the checked result: the same variant's outputs in the check step (every
output, also where a family compares none between variants, as pfgemm's tensor-core sums). The check step
fills its outputs with the same 0xFF, so elements a kernel never writes (padding) agree.
Poisoning and comparing happen outside the CUDA events: the same kernels, launches and bytes are timed.

A time below bytes_moved / read ceiling (more than ROOFLINE_SLACK) is impossible for a kernel that reads
its bytes from DRAM; it is reported as such, never as a speedup. Only cold timings are held to it (the
copies cover 3x the L2, InputCopies.cold): with --hot, or copies capped short, the L2 may serve the reads.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from strata_bench.cases import Case, Family
from strata_bench.checks.diagnosis import diagnose
from strata_bench.timing.ceilings import Ceilings
from strata_bench.timing.graph import InputCopies

POISON = 0xFF
TIMED_OUTPUT_DIFFERS = "timed output differs"
IMPOSSIBLE = "impossible"
# The read ceiling measured today is a few percent below what a tuned kernel reaches (issue 12, item 2):
# a kernel at up to 10% over it is not called impossible; 1900% (a kernel that skipped its work) is.
ROOFLINE_SLACK = 0.10


def poison_outputs(prep: InputCopies) -> None:
    """Fill every output buffer of every copy with 0xFF bytes (on the current stream)."""
    import cupy

    for outs in prep.outs:
        for arr in outs.values():
            arr.view(cupy.uint8).fill(POISON)


def _host(a: Any) -> np.ndarray:
    return a.get() if hasattr(a, "get") else np.asarray(a)


def timed_output_problem(family: Family, case: Case, variant: str, prep: InputCopies,
                         checked: Mapping[str, Any], copies: int | None = None) -> str:
    """"" when every copy's outputs equal `checked` bitwise, else "timed output differs: ..."
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
            return f"{TIMED_OUTPUT_DIFFERS}: {variant} copy {k} of {len(prep.outs)}: {detail}"
    return ""


def roofline_seconds(bytes_moved: int, ceilings: Ceilings) -> float:
    """The least time a kernel that moves `bytes_moved` bytes can take at the measured read ceiling."""
    return bytes_moved / ceilings.read_bps


def roofline_problem(variant: str, seconds: float, bytes_moved: int, ceilings: Ceilings) -> str:
    """"" when `seconds` per call is possible, else "impossible: ..." with the fraction of the ceiling."""
    floor = roofline_seconds(bytes_moved, ceilings)
    if not (bytes_moved > 0 and seconds > 0 and ceilings.read_bps > 0):
        return ""
    if seconds * (1 + ROOFLINE_SLACK) >= floor:
        return ""
    return (f"{IMPOSSIBLE}: {variant} at {seconds * 1e6:.3f} us moves {bytes_moved} bytes at "
            f"{floor / seconds:.0%} of the measured read ceiling ({ceilings.read_bps / 1e12:.2f} TB/s, "
            f"least {floor * 1e6:.3f} us)")
