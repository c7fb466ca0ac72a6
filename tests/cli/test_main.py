"""Every command has help with an example; GPU commands exit 77 with one reason line on a GPU-less host."""
from __future__ import annotations

import threading

import click
import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli
from strata_bench.gpu.devices import probe


def _all_commands(group: click.Group, prefix=()):
    for name, cmd in group.commands.items():
        yield prefix + (name,), cmd
        if isinstance(cmd, click.Group):
            yield from _all_commands(cmd, prefix + (name,))


@pytest.mark.parametrize("path", [p for p, _ in _all_commands(cli)], ids=lambda p: " ".join(p))
def test_every_command_has_help_with_an_example(path):
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example" in result.output, f"{' '.join(path)} --help has no example"


def test_top_level_help_lists_exit_codes():
    result = CliRunner().invoke(cli, ["--help"])
    assert "77" in result.output and result.exit_code == 0


@pytest.mark.skipif(probe().usable, reason="a GPU is usable here; this checks the GPU-less path")
def test_parity_without_gpu_exits_77_with_one_reason_line():
    result = CliRunner().invoke(cli, ["parity", "--results", "unused-results"])
    if result.exit_code == 2:  # no families registered yet would be a usage error, not a skip
        pytest.fail(result.output)
    assert result.exit_code == 77, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[-1].startswith("skipped: no usable CUDA GPU (")


def test_parity_filter_matching_nothing_is_usage_error_listing_families():
    result = CliRunner().invoke(cli, ["parity", "-k", "no-such-case-anywhere"])
    assert result.exit_code == 2
    assert "no case matches" in result.output


def test_parity_bad_regex_is_one_line_usage_error():
    result = CliRunner().invoke(cli, ["parity", "-k", "("])
    assert result.exit_code == 2
    assert "not a regular expression" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("args,expected", [
    (["--bogus"], "Error: No such option '--bogus'. (see 'strata-bench --help')"),
    (["nosuch"], "Error: No such command 'nosuch'. (see 'strata-bench --help')"),
    (["parity", "--bogus"], "Error: No such option '--bogus'. (Did you mean one of: '--cols', '--gguf', "
                               "'--rows'?) (see 'strata-bench parity --help')"),
    (["fixtures", "nosuch"], "Error: No such command 'nosuch'. (see 'strata-bench fixtures --help')"),
    (["compile", "-j", "0"], "Error: Invalid value for '-j' / '--jobs': 0 is not in the range 1<=x<=64. "
                             "(see 'strata-bench compile --help')"),
])
def test_usage_errors_are_one_line_exit_2(args, expected):
    result = CliRunner().invoke(cli, args, prog_name="strata-bench")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [expected]


def _invoke_raising(exc: BaseException, *before: str):
    """Run a throw-away command that raises `exc`, through the real group's error mapping (`before`: the
    group's own options)."""
    @click.command("explode")
    def explode():
        raise exc

    cli.add_command(explode)
    try:
        return CliRunner().invoke(cli, [*before, "explode"])
    finally:
        cli.commands.pop("explode")


RAISED_AT = next(n for n, line in enumerate(open(__file__), 1) if line.strip() == "raise exc")


def test_a_missing_required_package_is_one_line_exit_2():
    result = _invoke_raising(ModuleNotFoundError("No module named 'gguf'", name="gguf"))
    assert result.exit_code == 2, result.output
    assert result.output.strip() == ("strata-bench needs the Python package 'gguf', which is not installed "
                                     "(pip install -e . installs every requirement)")


def test_a_missing_module_that_is_not_a_requirement_is_not_hidden():
    result = _invoke_raising(ModuleNotFoundError("No module named 'nope'", name="nope"))
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [f"internal error at {__file__}:{RAISED_AT}: ModuleNotFoundError: No module "
                                          "named 'nope' (strata-bench --debug ... shows the traceback)"]


def test_an_unexpected_exception_is_one_line_exit_1_and_its_traceback_only_under_debug():
    result = _invoke_raising(RuntimeError("boom\nsecond line"))
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [f"internal error at {__file__}:{RAISED_AT}: RuntimeError: boom "
                                          "(strata-bench --debug ... shows the traceback)"]
    debug = _invoke_raising(RuntimeError("boom"), "--debug")
    assert isinstance(debug.exception, RuntimeError) and debug.exit_code == 1


@pytest.mark.parametrize("body,line,why", [
    ('x = 1\nraise ValueError("boom")\n', 2, "ValueError: boom"),
    ("import json\n\njson.loads(5)\n", 3, "TypeError: the JSON object must be str, bytes or bytearray, not int"),
])
def test_a_case_file_that_raises_is_one_line_naming_it_exit_2(tmp_path, body, line, why):
    cases = tmp_path / "my_cases.py"
    cases.write_text(body)
    result = CliRunner().invoke(cli, ["parity", "--cases", str(cases), "--list"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"{cases}:{line}: the case file raised {why}"]


def test_an_error_whose_cause_chain_loops_is_one_line_exit_2():
    from strata_bench.errors import InputError

    first, second = InputError("bad value: 7"), InputError("the other")
    first.__cause__, second.__context__ = second, first  # a chain that names itself again
    outcome = []
    # A daemon thread: a walk that loops must fail this test, not hang the suite.
    worker = threading.Thread(target=lambda: outcome.append(_invoke_raising(first)), daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert outcome, "the exception-chain walk did not end"
    assert outcome[0].exit_code == 2 and outcome[0].output == "bad value: 7\n"
