"""Start-up: `--help` of every command and a usage error import no numpy, pandas or scipy (the 1.4 s they
cost was most of `strata-bench --help`'s time). Checked by import, not by the clock: a test never asserts on
wall time."""
from __future__ import annotations

import subprocess
import sys

import pytest

from strata_bench.cli.main import cli

PROBE = """
import contextlib, io, sys
sys.argv = ["strata-bench", *{args!r}]
try:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        from strata_bench.cli.main import main
        main()
except SystemExit as exc:
    code = exc.code
print(code, sorted(m for m in ("numpy", "pandas", "scipy") if m in sys.modules))
"""


def _heavy(args: list[str]) -> str:
    done = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True,
                          timeout=120)
    return done.stdout.strip()


@pytest.mark.parametrize("command", [[], *([name] for name in sorted(cli.commands))])
def test_help_loads_no_numeric_library(command):
    assert _heavy([*command, "--help"]) == "0 []"


@pytest.mark.parametrize("args", [["parity", "--shape", "12"], ["bench", "--cols", "x"],
                                  ["ab", "--pairs", "0", "--a", "x", "--b", "y"], ["parity", "--nope"]])
def test_a_usage_error_loads_no_numeric_library(args):
    assert _heavy(args) == "2 []"
