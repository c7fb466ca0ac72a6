"""Bad input from the issue's reproducers: one line naming the problem and the value, exit 2, nothing
written (fixtures make with a bad seed or a shape larger than memory; manifests with bad entries)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("STRATA_FIXTURES", raising=False)
    return tmp_path


@pytest.mark.parametrize("extra,line", [
    (["--seed", "-1"], "bad seed -1: expected 0 <= seed <= 9223372036854775807"),
    (["--activations", "-3"], "bad --activations -3: expected 0 or more rows"),
])
def test_fixtures_make_refuses(cwd, extra, line):
    result = CliRunner().invoke(cli, ["fixtures", "make", "--format", "q8_0", "--shape", "4x256", *extra])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [line]
    assert list(cwd.iterdir()) == []


def test_huge_shape_is_refused_before_allocating(cwd):
    result = CliRunner().invoke(cli, ["fixtures", "make", "--format", "q8_0", "--shape", "100000000x256"])
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("shape 100000000x256 of q8_0 needs about 311.4 GiB, more than half of the ")
    assert list(cwd.iterdir()) == []


@pytest.mark.parametrize("entry,reason", [
    (5, "entry 'x' is 5, not a table"),
    ({}, "entry 'x' has no str 'file'"),
    ({"file": "x.npz", "values_sha256": "0", "fmt": "q8_0", "rows": 1, "cols": 32}, "entry 'x' has no str 'sha256'"),
])
@pytest.mark.parametrize("sub", ["list", "verify"])
def test_bad_manifest_entries(cwd, entry, reason, sub):
    (cwd / "fx").mkdir()
    manifest = cwd / "fx" / "manifest.json"
    manifest.write_text(json.dumps({"schema": 1, "fixtures": {"x": entry}}))
    before = manifest.read_bytes()
    result = CliRunner().invoke(cli, ["fixtures", sub, "--root", str(cwd / "fx")])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"corrupt fixture manifest {manifest}: {reason}"]
    assert manifest.read_bytes() == before


@pytest.mark.parametrize("args", [["parity", "--list"], ["compile", "--arch", "90"]])
def test_case_file_with_a_syntax_error(cwd, args, family_registry):
    bad = cwd / "bad.py"
    bad.write_text("x = 1\ndef f(:\n")
    result = CliRunner().invoke(cli, [*args, "--cases", str(bad)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"{bad}:2: syntax error in the case file: invalid syntax"]
