"""What the case tests share: the built-in families (tests/conftest.py drops any TOML variant a test
added to them), and the one line a TOML file's error gives."""
from __future__ import annotations

from pathlib import Path

import pytest

from strata_bench.errors import InputError


@pytest.fixture
def families():
    """A run's own catalog of the built-ins (runner/catalog.py): what a test adds stays in it."""
    from strata_bench.runner.catalog import build_catalog
    from strata_bench.cases.spec import RunSpec

    return build_catalog(RunSpec())


def toml_error(path: Path, families) -> str:
    """The InputError loading `path` raises (it must raise one), checked to be one line."""
    from strata_bench.cases.toml_variant import load_variant_files

    with pytest.raises(InputError) as err:
        load_variant_files((str(path),), families)
    assert "\n" not in str(err.value), str(err.value)
    return str(err.value)
