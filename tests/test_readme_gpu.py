"""The README's example command lines that need a GPU, run on the GPU as a reader types them (read from
README.md by tests/test_readme_examples.py, which runs only their `--list` on the CPU, so it cannot see a
command that lists its cases and then fails on the device, as `parity --shape 2560x12288` once did).

Each runs as its own process in a working folder holding the repository's examples/, experiments/ and docs/
(the paths the examples name), where what it writes stays; `strata-bench` is this tree's
`python -m strata_bench`, the command an `ab` runs after `--` too. Every one must exit 0 without a traceback.
The GPU suite runs this file as its step `readme` (scripts/gpu_suite.sh); elsewhere it skips."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from strata_bench.kernels.sources import REPO_ROOT
from tests.test_readme_examples import EXAMPLES, NEEDS_GPU, _argv

STRATA = [sys.executable, "-m", "strata_bench"]


def needs_gpu(argv: list[str]) -> bool:
    """A command the README says exits 77 without a GPU, kernel A/B (--family), or an A/B whose command
    is one of those."""
    if argv[0] in NEEDS_GPU or (argv[0] == "ab" and "--family" in argv):
        return True
    inner = argv[argv.index("--") + 1:] if argv[0] == "ab" and "--" in argv else []
    return inner[:1] == ["strata-bench"] and needs_gpu(inner[1:])


def command_line(argv: list[str]) -> list[str]:
    """The process to start: `strata-bench` (and the one an A/B runs after `--`) as this tree's module."""
    line = STRATA + argv
    if "--" in argv and argv[argv.index("--") + 1] == "strata-bench":
        split = len(STRATA) + argv.index("--") + 1
        line[split:split + 1] = STRATA
    return line


GPU_EXAMPLES = [e for e in EXAMPLES if needs_gpu(_argv(e))]


def test_the_readme_has_gpu_examples_of_each_kind():
    # Runs without a GPU: the parametrization below would silently shrink if the README's examples moved.
    assert {_argv(e)[0] for e in GPU_EXAMPLES} == {"parity", "bench", "ab", "workload"}, GPU_EXAMPLES


@pytest.fixture
def here(tmp_path):
    for name in ("examples", "experiments", "docs"):
        (tmp_path / name).symlink_to(REPO_ROOT / name)
    return tmp_path


@pytest.mark.gpu
@pytest.mark.parametrize("example", GPU_EXAMPLES, ids=[" ".join(e.split()[1:4]) for e in GPU_EXAMPLES])
def test_readme_example_runs_on_the_gpu(example, here):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(command_line(_argv(example)), cwd=here, env=env, capture_output=True, text=True,
                          timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in out, f"{example}: exit {proc.returncode}\n{out[-4000:]}"
