"""The fixture record refuses a shape that does not match its format, and a name that is not a safe file name."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.data.fixture import Fixture
from strata_bench.errors import InputError

def test_fixture_checks_its_shape():
    with pytest.raises(InputError, match="expected uint8"):
        Fixture("x", "q8_0", 2, 64, np.zeros((2, 60), np.uint8), {})
    with pytest.raises(InputError, match="bad fixture name"):
        Fixture("../x", "q8_0", 2, 64, np.zeros((2, 68), np.uint8), {})
