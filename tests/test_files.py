"""files.py: a user's file is read only when it is a regular file of a bounded size, else one line."""
from __future__ import annotations

import os

import pytest

from strata_bench.errors import InputError
from strata_bench.files import read_regular, regular_size


def test_a_regular_file_within_the_bound_is_read(tmp_path):
    (tmp_path / "f").write_bytes(b"12345")
    assert read_regular(tmp_path / "f", "f", 5) == b"12345" and regular_size(tmp_path / "f", "f", 5) == 5


@pytest.mark.parametrize("make,line", [
    (lambda p: os.mkfifo(p), "x: not a regular file (a FIFO)"),  # open() would wait for a writer for ever
    (lambda p: p.mkdir(), "x: not a regular file (a folder)"),
    (lambda p: p.write_bytes(b"123456"), "x: 6 bytes, more than the 5 bytes read here"),
    (lambda p: None, "x: cannot read it (No such file or directory)"),
])
def test_anything_else_is_one_line(tmp_path, make, line):
    make(tmp_path / "x")
    with pytest.raises(InputError) as err:
        read_regular(tmp_path / "x", "x", 5)
    assert str(err.value) == line
