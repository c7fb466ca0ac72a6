"""CaseRequest (cases/request.py): --shape/--cols on parity mean what they mean on bench (the bench sweep),
a shape a format cannot take is an InputError naming both, and options that need one another."""
from __future__ import annotations

import pytest

from strata_bench.cases import CaseFilter, select_cases

from strata_bench.cases.request import CaseRequest, request_cases
from strata_bench.errors import InputError



def test_shape_and_cols_sweep_every_default_case(families, capsys):
    flt = CaseFilter(("mmvq",), ("iq3_s",))
    got = request_cases(flt, CaseRequest(shape=(4096, 14336), cols=(1, 8)), families)
    # Every default case but the fixture's (its real rows keep their shape: left out, in one line) takes the
    # shape and the columns, keeping its variants; those that then coincide collapse into one per data source
    # and column count, in the defaults' order.
    assert {(c.family, c.fmt, c.rows, c.cols, c.variants, c.params) for c in got} == {
        ("mmvq", "iq3_s", 4096, 14336, ("old", "new"), ())}
    assert [c.name for c in got] == [
        "mmvq/iq3_s/4096x14336/n1/seed:1", "mmvq/iq3_s/4096x14336/n8/seed:1",
        "mmvq/iq3_s/4096x14336/n1/edge:2", "mmvq/iq3_s/4096x14336/n8/edge:2"]
    assert capsys.readouterr().err == ("--shape 4096x14336: 2 fixture cases left out (real weights keep their own "
                                       "shape: --fixtures with --cols runs them)\n")


def test_no_request_is_the_default_list(families):
    flt = CaseFilter()
    assert request_cases(flt, CaseRequest(), families) == select_cases(flt, families)


def test_shape_a_format_cannot_take(families):
    with pytest.raises(InputError, match=r"^--shape 64x1000: q8_0 takes rows of a multiple of 32 inputs, 1000 is "
                                         r"not \(family mmvq\)$"):
        request_cases(CaseFilter(("mmvq",), ("q8_0",)), CaseRequest(shape=(64, 1000)), families)


@pytest.mark.parametrize("request_,line", [
    (CaseRequest(tensor="x"), "--tensor needs --gguf FILE"),
    (CaseRequest(rows=(0, 4)), "--rows needs --gguf FILE"),
    (CaseRequest(gguf="m.gguf"), "--gguf m.gguf needs --tensor REGEX naming the tensors to read"),
    (CaseRequest(shape=(8, 256), fixtures=("a*",)),
     "--shape replaces a case's rows and inputs; real weights (--fixtures, --gguf) bring their own: use --cols "
     "alone with them"),
])
def test_options_that_need_one_another(request_, line):
    with pytest.raises(InputError) as err:
        request_.check()
    assert str(err.value) == line
