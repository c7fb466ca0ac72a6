"""A float64 reference's own statistics, the part of its checks that no variant's output changes: whether
every element is finite, max |ref| and sum ref^2 over the finite ones (the NMSE denominator) and its
largest bound. Computed a piece at a time on the pieces' threads (checks/pieces.py), and stored with
the reference in its cache entry (checks/refcache.py), so a warm run reads them instead.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from strata_bench.cases import Expected
from strata_bench.checks import pieces


@dataclass(frozen=True)
class RefStats:
    all_finite: bool
    max_ref: float
    denom: float  # sum ref^2 over the finite elements, in the reference's own layout (np.sum's bits)
    largest_bound: float  # the tolerance's largest value (NaN where one is NaN)

    def to_json(self) -> list:
        return [self.all_finite, self.max_ref, self.denom, self.largest_bound]

    @classmethod
    def from_json(cls, value: list) -> "RefStats":
        finite, max_ref, denom, largest = value
        return cls(bool(finite), float(max_ref), float(denom), float(largest))


def reference_stats(exp: Expected, piece: int = pieces.PIECE) -> RefStats:
    """`exp`'s statistics, its reference read in its own layout (as np.square over it lays out its result,
    whose sum this was before the pieces: a transposed reference sums as it did) in pieces of `piece`."""
    ref = np.asarray(exp.ref, dtype=np.float64)
    flat = pieces.flat(ref, pieces.result_axes(ref))
    found = pieces.run([partial(_ref_piece, flat, lo, hi) for lo, hi in pieces.leaves(flat.size, piece)])
    return RefStats(all(p[0] for p in found), max((max(abs(p[1]), abs(p[2])) for p in found), default=0.0),
                    pieces.tree_sum(flat.size, piece, [p[3] for p in found]), _largest_bound(exp.tol))


def _largest_bound(tol: object) -> float:
    if np.ndim(tol) == 0:
        return float(tol)
    tol = np.asarray(tol, dtype=np.float64)
    return float(np.max(tol)) if tol.size else 0.0


def _ref_piece(flat: np.ndarray, lo: int, hi: int) -> tuple[bool, float, float, float]:
    """(whether every element is finite, max and min of the finite ones, sum of their squares) of
    flat[lo:hi]; 0 for an empty piece. max |x| = max(|max x|, |min x|): exact, and no |x| array; where
    both are finite every element is (a NaN makes max NaN, an inf makes max or min infinite), so the
    finite mask is only made otherwise."""
    x = flat[lo:hi]
    if not x.size:
        return True, 0.0, 0.0, 0.0
    with np.errstate(invalid="ignore"):
        top, bottom = float(x.max()), float(x.min())
    finite = bool(np.isfinite(top) and np.isfinite(bottom))
    if not finite:
        x = np.where(np.isfinite(x), x, 0.0)
        top, bottom = float(x.max()), float(x.min())
    return finite, top, bottom, float(np.sum(np.square(x, out=pieces.scratch(x.size))))
