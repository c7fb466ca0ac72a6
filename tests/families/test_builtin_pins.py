"""Pins of the built-in formats' cases, inputs and references of mmvq and dequant: cases of formats only a
foreign variant runs were added beside them, and the built-in ones must not move by a bit."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from strata_bench.families import load_builtin_families
from strata_bench.kit import exact_weights, matvec_reference


def _sha(parts) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else np.ascontiguousarray(part).tobytes())
    return h.hexdigest()[:24]


def _names(cases) -> str:
    return _sha(f"{c.name} {c.variants}\n".encode() for c in cases)


@pytest.mark.parametrize("family, cases, bench, names, bench_names", [
    # 334: issue 37 added iq1_s's and then iq2_xxs's tensor-core cases (131072x1024 at 8 and 11 columns, 131077x256
    # at 8), then those of iq1_m, iq2_xs, iq2_s, iq3_xxs and iq3_s (32768x1024 at 8 and 11, 32773x256 at 8), then
    # iq2_xxs's and iq1_s's one-column mmvq_onecol cases (131072x1024 and 131077x256 at 1), then iq1_m's (131072x256
    # at 1 and 11, 131077x256 at 1). Without iq1_m's the list is the 331 of d8a1c162ce97b083da87b517, without the
    # one-column ones too the 327 of c0c701dca0bc25d83fe2bccb, without the last five formats' the 312 of
    # 86c899e0aab1f2b01b2785e1, without iq2_xxs's the 309 of 73bc0e58206dce902213964b, without both pairs' the 306
    # of 16ef550dcbc29a802a06d657, in the same order
    ("mmvq", 334, 88, "9fc2287a1012d2cc9f6857e3", "f7127650e1540b47d9bcc827"),
    ("dequant", 33, 11, "ffe1cb9ad6db971477acf9a3", "05b997e277ccf89343b83b7c"),
])
def test_default_and_bench_case_lists_are_unchanged(family, cases, bench, names, bench_names):
    fam = load_builtin_families()[family]
    assert (len(list(fam.default_cases())), len(list(fam.bench_cases()))) == (cases, bench)
    assert (_names(fam.default_cases()), _names(fam.bench_cases())) == (names, bench_names)


def _inputs_digest(host) -> str:
    return _sha(host[k] for k in sorted(host) if isinstance(host[k], np.ndarray))


def _made(family: str, args: tuple):
    """(the registered family, its case of `args`, the case's host inputs)."""
    fam = load_builtin_families()[family]
    case = fam.case(*args)
    return fam, case, fam.make_inputs(case)


@pytest.mark.parametrize("args, digest", [
    (("iq2_xxs", 37, 1280, 4, "seed:1"), "783698317f572fc4849f5e74"),
    (("q8_0", 37, 1280, 11, "edge:2"), "f6d5220d75b8902a52a5c321"),
    (("iq1_m", 16, 512, 3, "edge:2"), "c03645c9e63783406eb539bd"),
])
def test_mmvq_inputs_are_pinned_and_the_reference_is_the_exact_weights_matvec(args, digest):
    fam, case, host = _made("mmvq", args)
    assert _inputs_digest(host) == digest
    # The reference's own construction, spelled out (a float64 product: its bits are the BLAS's, so it is
    # compared with the construction rather than pinned by a digest).
    fmt, rows, cols, _, data = args
    whole = fam.make_inputs(fam.case(fmt, rows, cols, 11, data))
    want = matvec_reference(exact_weights(fmt, whole["raw"]), whole["x"], whole["act"])
    got = fam.reference(case, host)
    cols_ = host["cols"]
    for exp, (y, tol) in zip(got, [(want.y_q, want.bound_q), (want.y_raw, want.bound_raw)]):
        assert np.array_equal(exp.ref, y[cols_]) and np.array_equal(exp.tol, tol[cols_])


@pytest.mark.parametrize("args, digest", [
    (("iq4_xs", 7, 768, 1, "edge:2"), "e7e8d8d39a94f2edb70e275e"),
    (("q2_0", 7, 768, 1, "seed:1"), "4873b308bceb1a6464d9d0c5"),
])
def test_dequant_inputs_and_references_are_pinned(args, digest):
    fam, case, host = _made("dequant", args)
    refs = fam.reference(case, host)
    parts = [_inputs_digest(host).encode()]
    for exp in refs:
        parts += [exp.label.encode(), np.asarray(exp.ref, np.float64), np.asarray(exp.tol, np.float64)]
    assert _sha(parts) == digest
