"""The format registry: a name is taken once, and a subclass must name itself."""
from __future__ import annotations

import pytest

from strata_bench.formats import all_formats, get_format


# --- the registry ----------------------------------------------------------------------------------
def test_a_second_format_with_a_taken_name_is_refused_and_names_both_classes():
    from strata_bench.errors import RegistryError
    from strata_bench.formats import FORMATS, QuantFormat

    held = get_format("q8_0")
    with pytest.raises(RegistryError, match=r"'q8_0' is taken: strata_bench\.formats\.legacy\.Q8_0 holds it.*MyQ8"):
        class MyQ8(QuantFormat, name="q8_0", block_size=32, type_size=34):
            pass
    assert FORMATS["q8_0"] is held


def test_a_subclass_of_a_format_that_names_none_of_its_own_is_refused():
    from strata_bench.errors import RegistryError
    from strata_bench.formats.legacy import Q8_0

    before = dict(all_formats())
    with pytest.raises(RegistryError, match="Q8Tweak inherits the name 'q8_0' of Q8_0"):
        class Q8Tweak(Q8_0):
            pass
    assert all_formats() == before


def test_a_base_class_without_a_name_is_allowed():
    from strata_bench.formats._common import ScaledFormat

    before = dict(all_formats())

    class _AnotherBase(ScaledFormat):
        pass

    assert all_formats() == before
