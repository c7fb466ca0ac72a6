"""--dump-failures: the arrays of a failing case as an .npz np.load reads without pickle (the exact keys),
the .json beside it, file names made from case names, and the folder refused before a run."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from strata_bench.cases import Case, Expected
from strata_bench.checks.dump import FailureDump, check_dump_folder, dump_arrays, safe_stem
from strata_bench.checks.outcome import CaseResult, CheckResult, CaseStatus
from strata_bench.errors import InputError
from strata_bench.gpu.launch import VariantRun

CASE = Case("mmvq", "iq2_xs", 4, 64, 2, "edge:2", params=(("col", 1),))
HOST = {"raw": np.arange(12, dtype=np.uint8).reshape(2, 6), "x": np.ones((2, 64), np.float32),
        "cols": slice(0, 2), "note": "seeded", "groups": (2, 0, 1), "sub": {"w": np.zeros(3), "k": 7},
        "parts": [np.ones(2, np.int16), "text"]}


def _runs():
    y = np.full((2, 4), 0.5, np.float32)
    return {v: VariantRun(v, {"y": y + i, "flags": np.zeros(4, np.uint8)}, {"y": np.zeros((2, 4), bool)})
            for i, v in enumerate(("old", "new"))}


REFS = (Expected("y", np.full((2, 4), 0.5), np.full((2, 4), 1e-6), "each its own", "f64(q8_1 acts)"),
        Expected("y", np.full((2, 4), 0.5), 0.25, "one bound", "f64(raw acts)"))
KEYS = ["input/groups", "input/parts/0", "input/raw", "input/sub/k", "input/sub/w", "input/x",
        "output/new/flags", "output/new/y", "output/old/flags", "output/old/y",
        "reference/0/tol", "reference/0/values", "reference/1/tol", "reference/1/values"]


def _failed(device=0):
    check = CheckResult("f64", "new", False, "y vs f64(q8_1 acts): worst |err|/bound 1e+06 at column 0, row 0 (...)")
    return CaseResult(CASE, device, CaseStatus.FAIL, (CheckResult("bitwise", "new", True), check), 0.1)


def test_dump_arrays_keys_and_the_inputs_that_are_not_numbers():
    arrays, other = dump_arrays(HOST, {v: r.outputs for v, r in _runs().items()}, REFS)
    assert sorted(arrays) == KEYS
    assert other == {"input/cols": "slice(0, 2, None)", "input/note": "seeded", "input/parts/1": "text"}
    assert arrays["input/groups"].tolist() == [2, 0, 1] and arrays["reference/1/tol"].shape == ()


def test_dump_writes_a_loadable_npz_and_its_json(tmp_path):
    dump = FailureDump(tmp_path / "fails", rerun=lambda r: f"strata-bench parity -k '^{r.case.name}$'")
    path = dump(_failed(), HOST, _runs(), REFS)
    assert path == tmp_path / "fails" / "mmvq_iq2_xs_4x64_n2_edge_2_col=1.npz" and dump.written == [path]
    with np.load(path, allow_pickle=False) as z:
        assert sorted(z.files) == KEYS
        assert np.array_equal(z["input/raw"], HOST["raw"]) and z["input/raw"].dtype == np.uint8
        assert z["output/new/y"].dtype == np.float32 and z["output/new/y"][0, 0] == 1.5
        assert np.array_equal(z["reference/0/tol"], REFS[0].tol) and float(z["reference/1/tol"]) == 0.25
    side = json.loads(path.with_suffix(".json").read_text())
    assert side["case"] == CASE.name and side["device"] == 0 and side["params"] == {"col": 1}
    assert side["rerun"] == f"strata-bench parity -k '^{CASE.name}$'"
    assert side["failed"] == [{"check": "f64", "variant": "new", "detail": _failed().checks[1].detail}]
    assert side["references"] == [
        {"index": 0, "output": "y", "label": "f64(q8_1 acts)", "why": "each its own", "tol": "per element"},
        {"index": 1, "output": "y", "label": "f64(raw acts)", "why": "one bound", "tol": 0.25}]
    assert side["other_inputs"]["input/note"] == "seeded" and side["arrays"] == KEYS
    # The same case failing on a second device gets a file of its own.
    assert dump(_failed(device=1), HOST, _runs(), REFS) == tmp_path / "fails" / "mmvq_iq2_xs_4x64_n2_edge_2_col=1-2.npz"


def test_a_dump_that_cannot_be_written_is_a_warning(tmp_path):
    (tmp_path / "f").write_text("")
    lines = []
    dump = FailureDump(tmp_path / "f" / "sub", warn=lines.append)
    assert dump(_failed(), HOST, _runs(), REFS) is None and dump.written == []
    assert len(lines) == 1 and lines[0].startswith(f"--dump-failures: could not write {tmp_path}/f/sub/")


def test_safe_stem():
    assert safe_stem("mmvq/iq2_xs/512x2560/n4/edge:2") == "mmvq_iq2_xs_512x2560_n4_edge_2"
    assert safe_stem("pfgemm/iq2_s/256x1536/n150/fixture:a b/groups=0,1") == \
        "pfgemm_iq2_s_256x1536_n150_fixture_a_b_groups=0,1"
    assert safe_stem("../..") == "case"
    long = safe_stem("x/" * 200)
    assert len(long) == 160 and long != safe_stem("x/" * 201)


def test_dump_folder_checks(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match=f"^--dump-failures {tmp_path}/file: exists and is not a folder$"):
        check_dump_folder(tmp_path / "file")
    with pytest.raises(InputError, match=f"^--dump-failures {tmp_path}/file/sub: cannot be made, "
                                         f"{tmp_path}/file is not a folder$"):
        check_dump_folder(tmp_path / "file" / "sub")
    assert check_dump_folder(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    assert not (tmp_path / "new").exists()  # nothing is made before a case fails


def test_dump_folder_not_writable(tmp_path, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    # os.access as an ordinary user would answer for a folder without write permission (root may write anywhere)
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != locked)
    with pytest.raises(InputError, match=f"^--dump-failures {locked}: cannot write in {locked}$"):
        check_dump_folder(locked)
    with pytest.raises(InputError, match=f"^--dump-failures {locked}/a: cannot write in {locked}$"):
        check_dump_folder(locked / "a")
