"""Bad input from the issue's reproducers: one line naming the problem and the value, exit 2, nothing
written (fixtures make with a bad seed or a shape larger than memory; manifests with bad entries; an empty
path given to any path option or argument)."""
from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli
from strata_bench.cli.options import SAID
from strata_bench.files import UserPath


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


@pytest.mark.parametrize("args", [["parity", "--list"],
                                  pytest.param(["compile", "--arch", "90"], marks=pytest.mark.nvrtc)])
def test_case_file_with_a_syntax_error(cwd, args, family_registry):
    bad = cwd / "bad.py"
    bad.write_text("x = 1\ndef f(:\n")
    result = CliRunner().invoke(cli, [*args, "--cases", str(bad)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"{bad}:2: syntax error in the case file: invalid syntax"]


def test_multi_tensor_from_gguf_is_all_or_nothing(cwd):
    from strata_bench.data.gguf_layout import read_layout
    from strata_bench.data.store import save_fixture
    from strata_bench.data.synthetic import make_synthetic
    from strata_bench.kernels.sources import REPO_ROOT

    rows_gguf = REPO_ROOT / "fixtures" / "smollm2-rows.gguf"
    last = read_layout(rows_gguf).tensors[-1].name
    clash = f"smollm2-rows-{last}-r0-64"
    save_fixture(make_synthetic("q8_0", 2, 64, seed=1, name=clash), cwd / "fx")
    before = {p.name: p.read_bytes() for p in (cwd / "fx").iterdir()}
    result = CliRunner().invoke(cli, ["fixtures", "from-gguf", str(rows_gguf), "--tensor", ".", "--root",
                                      str(cwd / "fx")])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"fixture {clash!r} already exists in {cwd / 'fx'} with other values "
                                          "(choose another --name or pass --force)"]
    assert {p.name: p.read_bytes() for p in (cwd / "fx").iterdir()} == before
    ok = CliRunner().invoke(cli, ["fixtures", "from-gguf", str(rows_gguf), "--tensor", ".", "--root",
                                  str(cwd / "fx"), "--force"])
    assert ok.exit_code == 0, ok.output
    assert len(list((cwd / "fx").glob("*.npz"))) == 18 and not list((cwd / "fx").glob(".*.tmp"))


def test_zero_dimension_gguf_tensor_writes_nothing(cwd):
    import struct

    head = b"GGUF" + struct.pack("<IQQ", 3, 2, 0)
    for name, shape in (("a", (32, 2)), ("z", (32, 0))):
        head += struct.pack("<Q", 1) + name.encode() + struct.pack("<I2Q", 2, *shape) + struct.pack("<IQ", 8, 0)
    path = cwd / "z.gguf"
    path.write_bytes(head + b"\0" * (-len(head) % 32) + b"\0" * 256)
    result = CliRunner().invoke(cli, ["fixtures", "from-gguf", str(path), "--tensor", ".", "--root", str(cwd / "fx")])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"{path} is corrupt: tensor 'z' has a zero dimension (shape [32, 0])"]
    assert not (cwd / "fx").exists()


@pytest.mark.parametrize("target,reason", [
    ("taken", "exists and is not a folder"),
    ("taken/sub", "cannot be made, {cwd}/taken is not a folder"),
])
def test_parity_dump_failures_into_a_file_is_refused_before_any_case(cwd, target, reason):
    (cwd / "taken").write_text("")
    result = CliRunner().invoke(cli, ["parity", "--dump-failures", str(cwd / target)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"--dump-failures {cwd / target}: {reason.format(cwd=cwd)}"]
    assert sorted(p.name for p in cwd.iterdir()) == ["taken"]  # no results folder: nothing ran


def test_parity_dump_failures_to_an_empty_path_is_a_usage_error(cwd):
    result = CliRunner().invoke(cli, ["parity", "--dump-failures", ""])  # it was the working folder: exit 77
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["--dump-failures '': the path is empty"]
    assert list(cwd.iterdir()) == []


@pytest.mark.parametrize("command", ["parity", "bench", "ab"])
def test_an_output_format_given_as_a_quant_format_names_the_output_option(cwd, command):
    """--format is only the quant-format filter; the output format is -o/--output on every command."""
    result = CliRunner().invoke(cli, [command, "--family", "mmvq", "--format", "iq2_xs,md", "--list"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["--format takes quant formats, got 'md'; the output format is -o md"]
    assert list(cwd.iterdir()) == []


@pytest.mark.parametrize("command", [["env"], ["results", "verify"], ["report", "x.json"], ["compare", "a", "b"]])
def test_every_command_spells_the_output_option_alike(command):
    assert "-o, --output" in CliRunner().invoke(cli, [*command, "--help"]).output


# Every path option and argument of every command, as the usage line spells it. '' was a path to click, and
# Path('') is '.': `ab --results ''` wrote its records into the working folder, `--cases ''` and `--kernels ''`
# were taken as no file at all, `fixtures list --root ''` listed the working folder.
RUN_PATHS = ["--cases", "--kernels", "--variants", "--ggml", "--ggml-b", "--gguf", "--results"]
EMPTY_PATHS = {
    "ab": RUN_PATHS, "bench": RUN_PATHS, "parity": [*RUN_PATHS, "--dump-failures"], "compile": RUN_PATHS[:5],
    "compare": ["OLD", "NEW"], "engine build": ["TREE"], "engine complete": ["--prompt-file"],
    "engine pack": ["TREE", "OUT"], "fixtures from-gguf": ["FILE", "--root"], "fixtures list": ["--root"],
    "fixtures make": ["--root"], "fixtures requantize": ["SOURCE", "--root"], "fixtures show": ["--root"],
    "fixtures verify": ["--root"], "plot": ["FILE", "--out"], "report": ["FILE", "--peer"],
    "results list": ["DIRECTORY"], "results verify": ["DIRECTORY"],
}


def _commands(group=cli, words=()):
    """(words, command) of every command under `group`."""
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _commands(command, (*words, name))
        else:
            yield " ".join((*words, name)), command


def _spelled(param):
    return max(param.opts, key=len) if isinstance(param, click.Option) else param.human_readable_name


def test_every_path_parameter_refuses_an_empty_path():
    paths = {words: [_spelled(p) for p in command.params if isinstance(p.type, click.Path)]
             for words, command in _commands()}
    assert {words: names for words, names in paths.items() if names} == EMPTY_PATHS
    assert all(isinstance(p.type, UserPath) for _, command in _commands() for p in command.params
               if isinstance(p.type, click.Path))


@pytest.mark.parametrize("words,name", [(words, name) for words, names in EMPTY_PATHS.items() for name in names])
def test_an_empty_path_is_one_line_exit_2_and_writes_nothing(cwd, words, name):
    command = dict(_commands())[words]
    if name.startswith("--"):
        args = [name, ""]
    else:  # an argument: those before it get a placeholder
        arguments = [_spelled(p) for p in command.params if isinstance(p, click.Argument)]
        args = ["x"] * arguments.index(name) + [""]
    result = CliRunner().invoke(cli, [*words.split(), *args])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [f"{name} '': the path is empty"]
    assert list(cwd.iterdir()) == []


# Text read as "not given" when empty: `--family ''` ran every case, `--shape ''` kept each case's shape,
# `ab --setup ''` set up nothing, each exiting 0.
EMPTY_TEXT = {
    "parity": ["--family", "--format", "-k", "--shape", "--cols", "--tensor", "--rows", "--device"],
    "bench": ["--family", "--format", "-k", "--shape", "--cols", "--device"],
    "compile": ["--family", "--format", "--arch"],
    "ab": ["--family", "--metric", "--same", "--prepare", "--conclude", "--setup", "--cleanup", "--ready", "--name"],
    "engine build": ["--arch"],
}


def test_the_text_options_that_select_or_run_are_declared_as_said():
    said = {words: [_spelled(p) for p in command.params if isinstance(p.type, type(SAID))]
            for words, command in _commands()}
    for words, names in EMPTY_TEXT.items():
        assert set(names) <= set(said[words]), words


@pytest.mark.parametrize("words,name", [(words, name) for words, names in EMPTY_TEXT.items() for name in names])
@pytest.mark.parametrize("value", ["", "  "])
def test_empty_text_is_one_line_exit_2_and_writes_nothing(cwd, words, name, value):
    extra = ["x"] if words == "engine build" else []
    result = CliRunner().invoke(cli, [*words.split(), *extra, name, value], prog_name="strata-bench")
    assert result.exit_code == 2, result.output
    shown = " / ".join(f"'{o}'" for o in next(p for p in dict(_commands())[words].params if name in p.opts).opts)
    assert result.stderr.splitlines() == [f"Error: Invalid value for {shown}: {value!r} is empty (see "
                                          f"'strata-bench {words} --help')"]
    assert list(cwd.iterdir()) == []
