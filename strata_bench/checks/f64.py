"""The float64 check of one output against one reference: every element's |err| within its bound (one
bound for every element, or each element's own), every error finite, the reference's non-finite
elements matched exactly; with max|err|, the NMSE and the worst element (the largest |err|/bound, named).
One pass over each piece of the arrays (checks/pieces.py), the pieces on a few threads; the numbers are
the element-by-element comparison's, bit for bit, whatever the piece size or thread count.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np

from strata_bench.cases import Expected
from strata_bench.checks import pieces
from strata_bench.checks.outcome import CheckResult
from strata_bench.checks.refstats import RefStats, reference_stats
from strata_bench.errors import InputError

# Elements per piece: a piece's temporaries stay in a core's cache, and no array of the whole size is
# made and faulted in.
PIECE = pieces.PIECE


class Reference:
    """What a reference contributes to every variant's check: its statistics (refstats.RefStats: `known`,
    read from its cache entry, else computed here) and its bounds (a float, or an array of the
    reference's shape), and both read flat in the order a check needs."""

    def __init__(self, exp: Expected, known: RefStats | None = None):
        self.ref = np.asarray(exp.ref, dtype=np.float64)
        self.bound = _bounds(exp, self.ref.shape)
        stats = known if known is not None else reference_stats(exp, PIECE)
        self.all_finite, self.max_ref, self.denom = stats.all_finite, stats.max_ref, stats.denom
        self.largest_bound = stats.largest_bound
        self._flats: dict[tuple[int, ...], tuple[np.ndarray, float | np.ndarray]] = {}

    def flat(self, axes: tuple[int, ...]) -> tuple[np.ndarray, float | np.ndarray]:
        """The reference and its bounds read flat with `axes` outermost (views where they are laid out so
        already, else copies made once per order)."""
        if axes not in self._flats:
            bound = self.bound if isinstance(self.bound, float) else pieces.flat(self.bound, axes)
            self._flats[axes] = (pieces.flat(self.ref, axes), bound)
        return self._flats[axes]


def _bounds(exp: Expected, shape: tuple[int, ...]) -> float | np.ndarray:
    """The tolerance as the check applies it: a scalar stays a float; an array is broadcast to the
    reference's shape in C order (a copy only where it is smaller or laid out otherwise), or InputError
    naming both shapes."""
    if np.ndim(exp.tol) == 0:
        return float(exp.tol)
    tol = np.asarray(exp.tol, dtype=np.float64)
    try:
        return np.ascontiguousarray(np.broadcast_to(tol, shape))
    except ValueError:
        raise InputError(f"{exp.output} vs {exp.label}: tolerance of shape {tol.shape} does not broadcast to "
                         f"the reference's {shape}") from None


def ratio(err: float, bound: float) -> float:
    """|err|/bound of one element: 0 for no error (whatever the bound), inf for a NaN error or an error
    against a zero (or NaN) bound."""
    if err == 0:
        return 0.0
    quotient = err / bound if bound else math.inf
    return math.inf if math.isnan(quotient) else quotient


class _Piece(NamedTuple):
    """One piece's part of an f64 check (flat indices are the whole array's)."""

    largest: int  # the largest |err| (the first NaN, else the first maximum: np.argmax's)
    top: float  # |err| there
    top_value: float  # the largest |err| that is not NaN (np.fmax's: NaN only where all are)
    worst: int  # the largest |err|/bound (per-element bounds; else `largest`)
    worst_ratio: float
    within: bool  # every |err| <= its bound (per-element bounds; else True)
    squares: float  # sum |err|^2
    special_ok: bool  # the non-finite references matched exactly (True where all are finite)


def _f64_piece(got: np.ndarray, ref: np.ndarray, bound: float | np.ndarray, all_finite: bool, lo: int,
               hi: int) -> _Piece:
    """flat[lo:hi]'s part of the check: |got - ref| (0 where the reference is not finite) in this
    thread's scratch array, its largest element, its largest quotient |err|/bound and whether every
    element is within its bound (per-element bounds), then its squares' sum (last: squared in place)."""
    g, r = got[lo:hi], ref[lo:hi]
    err = pieces.scratch(r.size)
    with np.errstate(invalid="ignore", over="ignore"):
        np.subtract(g, r, out=err)
        np.abs(err, out=err)
    special_ok = True
    if not all_finite:
        fin = np.isfinite(r)
        np.copyto(err, 0.0, where=~fin)
        special_ok = bool(np.array_equal(g[~fin], r[~fin], equal_nan=True))
    largest = int(np.argmax(err))
    top = float(err[largest])
    top_value = float(np.fmax.reduce(err)) if math.isnan(top) else top
    worst, quotient, within = largest, math.nan, True
    if not isinstance(bound, float):
        worst, quotient, within = _worst_quotient(err, bound[lo:hi])
    squares = float(np.sum(np.square(err, out=err)))
    return _Piece(lo + largest, top, top_value, lo + worst, quotient, within, squares, special_ok)


def _worst_quotient(err: np.ndarray, bound: np.ndarray) -> tuple[int, float, bool]:
    """(index of the largest |err|/bound, that quotient, whether every |err| is within its bound) of one
    piece: NaN (a NaN error or bound) counts as the largest, 0 for no error whatever the bound, and a NaN
    bound fails its element."""
    # x/0, 0/0 and a quotient past the float range (an error over a subnormal bound) are inf or NaN: the
    # largest, as they should be, so numpy's warnings about them say nothing
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        quotients = np.divide(err, bound)
    np.copyto(quotients, 0.0, where=err == 0)
    top = int(np.argmax(quotients))
    return top, float(quotients[top]), bool(np.all(err <= bound))


def _first_largest(values: Sequence[float]) -> int:
    """np.argmax's choice over the pieces' largest values (the first NaN, else the first maximum): as
    np.argmax finds the first of the whole, the first largest of the pieces' is the whole's."""
    return int(np.argmax(np.array(values, dtype=np.float64)))


def check(exp: Expected, stats: Reference, variant: str, got: np.ndarray,
               describe: Callable[[tuple[int, ...]], str]) -> CheckResult:
    if not stats.ref.size:
        return CheckResult("f64", variant, True, "", 0.0, stats.max_ref, stats.largest_bound, 0.0, exp.label,
                           None, None, "")
    got = got if got.shape == stats.ref.shape else np.broadcast_to(got, stats.ref.shape)
    axes = pieces.result_axes(got, stats.ref)  # |got - ref|'s layout: its squares sum in that order
    flat, (ref, bound) = pieces.flat(got, axes), stats.flat(axes)
    parts = pieces.leaves(flat.size, PIECE)
    found = pieces.run([partial(_f64_piece, flat, ref, bound, stats.all_finite, lo, hi) for lo, hi in parts])
    first = found[_first_largest([p.top for p in found])]
    # The errors where the reference is finite are all finite exactly when the largest is (a NaN is the
    # largest where there is one).
    finite = math.isfinite(first.top)
    max_err = float(np.fmax.reduce([p.top_value for p in found])) if math.isnan(first.top) else first.top
    if isinstance(bound, float):
        worst_index, within = first.largest, max_err <= bound
    else:
        worst_index = found[_first_largest([p.worst_ratio for p in found])].worst
        within = all(p.within for p in found)
    index = _unflattened(worst_index, stats.ref.shape, axes)
    worst = _worst_element(float(flat[worst_index]), float(ref[worst_index]),
                           bound if isinstance(bound, float) else float(bound[worst_index]), index, describe)
    nmse = pieces.tree_sum(flat.size, PIECE, [p.squares for p in found]) / stats.denom if stats.denom else 0.0
    # Non-finite references (e.g. an fp16 overflow) must be matched exactly.
    special_ok = all(p.special_ok for p in found)
    ok = finite and special_ok and within
    detail = "" if ok else (_bound_detail(exp, worst) if finite and special_ok else
                            f"{exp.output} vs {exp.label}: non-finite or mismatched special values")
    return CheckResult("f64", variant, ok, detail, max_err, stats.max_ref, stats.largest_bound, nmse, exp.label,
                       worst["ratio"], worst["index"], worst["at"])


def _unflattened(flat: int, shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    """The index in `shape` of element `flat` of an array read flat with `axes` outermost."""
    moved = np.unravel_index(flat, tuple(shape[axis] for axis in axes))
    index = [0] * len(shape)
    for axis, i in zip(axes, moved):
        index[axis] = int(i)
    return tuple(index)


def _worst_element(got: float, ref: float, limit: float, index: tuple[int, ...],
                   describe: Callable[[tuple[int, ...]], str]) -> dict[str, Any]:
    """The element with the largest |err|/bound: its ratio, index, name, |err| (computed again, as the
    pieces did: 0 where the reference is not finite) and bound."""
    err = abs(got - ref) if math.isfinite(ref) else 0.0
    return {"ratio": ratio(err, limit), "index": index, "at": describe(index), "err": err, "bound": limit}


def _bound_detail(exp: Expected, worst: Mapping[str, Any]) -> str:
    """'y vs f64: worst |err|/bound 1.73 at column 2, row 17 (|err| 3.100e-05 > bound 1.800e-05; why)'."""
    return (f"{exp.output} vs {exp.label}: worst |err|/bound {worst['ratio']:.3g} at {worst['at']} "
            f"(|err| {worst['err']:.3e} > bound {worst['bound']:.3e}; {exp.why})")
