"""What the case tests share: the built-in families (tests/conftest.py drops any TOML variant a test
added to them), and the one line a TOML file's error gives."""
from __future__ import annotations

from pathlib import Path

import pytest

from strata_bench.errors import InputError
from strata_bench.families import load_builtin_families


@pytest.fixture
def families():
    return load_builtin_families()


def toml_error(path: Path, families) -> str:
    """The InputError loading `path` raises (it must raise one), checked to be one line."""
    from strata_bench.cases.toml_variant import load_variant_files

    with pytest.raises(InputError) as err:
        load_variant_files((str(path),), families)
    assert "\n" not in str(err.value), str(err.value)
    return str(err.value)
