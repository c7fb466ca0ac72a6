"""What the launch-language tests share: the one line a TOML file's error gives (`families`, a run's own
catalog, is tests/conftest.py's)."""
from __future__ import annotations

from pathlib import Path

import pytest

from strata_bench.errors import InputError


def toml_error(path: Path, families) -> str:
    """The InputError loading `path` raises (it must raise one), checked to be one line."""
    from strata_bench.toml_abi.variant import load_variant_files

    with pytest.raises(InputError) as err:
        load_variant_files((str(path),), families)
    assert "\n" not in str(err.value), str(err.value)
    return str(err.value)
