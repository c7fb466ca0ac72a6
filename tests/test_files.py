"""files.py: a user's file is read only when it is a regular file of a bounded size, else one line."""
from __future__ import annotations

import os

import pytest

from strata_bench.errors import InputError
from strata_bench.files import read_regular, regular_size, write_problem


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


@pytest.mark.parametrize("make,path,why", [
    (lambda d: None, "", "the path is empty"),
    (lambda d: None, ".", "it is a folder"),
    (lambda d: None, "missing/x", "{d}/missing does not exist"),
    (lambda d: (d / "f").write_text(""), "f/x", "{d}/f is not a folder"),
    (lambda d: os.mkfifo(d / "fifo"), "fifo", "No such device or address"),  # no reader: a write blocks
])
def test_write_problem_names_why_and_writes_nothing(tmp_path, monkeypatch, make, path, why):
    monkeypatch.chdir(tmp_path)
    make(tmp_path)
    before = sorted(tmp_path.iterdir())
    assert write_problem(path) == why.format(d=tmp_path)
    assert sorted(tmp_path.iterdir()) == before


def test_write_problem_leaves_a_file_as_it_was(tmp_path):
    (tmp_path / "old").write_text("kept")
    assert write_problem(tmp_path / "old") is None and write_problem(tmp_path / "new") is None
    assert (tmp_path / "old").read_text() == "kept" and not (tmp_path / "new").exists()
