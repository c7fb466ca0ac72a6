"""The README's count of the tests marked slow (those its test command leaves out) is the collected count:
tests/conftest.py counts them before `-m` deselects any. Only a run over the whole test set (pytest
without paths, as the README and .ci/run run it) can count them; a run over chosen paths skips this."""
from __future__ import annotations

import re

import pytest

from strata_bench.kernels.sources import REPO_ROOT
from tests.conftest import SLOW_MARKED

COUNT = re.compile(r"The test command leaves out the (\d+) tests marked `slow`")


def test_the_readme_says_how_many_tests_are_marked_slow(pytestconfig):
    if pytestconfig.args_source is not pytest.Config.ArgsSource.TESTPATHS:
        pytest.skip("counts the whole test set: run pytest without paths, as the README does")
    said = COUNT.search((REPO_ROOT / "README.md").read_text(encoding="utf-8"))
    assert said, "README.md no longer says how many tests are marked slow"
    assert int(said.group(1)) == pytestconfig.stash[SLOW_MARKED]
