"""cases.registry: what registers, what is refused (typed, naming both classes), and re-loading a file."""
from __future__ import annotations

import textwrap

import pytest

from strata_bench.cases import Family, load_user_cases

from strata_bench.families import load_builtin_families
from strata_bench.errors import InputError, RegistryError


class _Minimal(Family):
    """No name: a base, never registered."""

    def default_cases(self): return []
    def make_inputs(self, case): return {}
    def to_device(self, case, host): return {}
    def alloc_outputs(self, case, dev): return {}
    def reference(self, case, host): return []


def test_builtin_families_register_in_module_order():
    # The registry's order is the order cases are listed and run (parity --list must not change).
    assert list(load_builtin_families())[:9] == ["dequant", "fp16deq", "grouped", "mmvq", "moe_combine", "pfgemm",
                                                 "q2warp", "q8_1", "swiglu_q8"]


def test_the_module_order_holds_whichever_family_module_was_imported_first(family_registry):
    """A test or a case file that imports strata_bench.families.mmvq first must not move mmvq ahead."""
    mmvq = family_registry.pop("mmvq")
    family_registry["mmvq"] = mmvq  # now last: out of its module order
    assert list(family_registry).index("mmvq") != 3
    assert list(load_builtin_families())[:9] == ["dequant", "fp16deq", "grouped", "mmvq", "moe_combine", "pfgemm",
                                                 "q2warp", "q8_1", "swiglu_q8"]


def test_a_base_without_a_name_does_not_register(family_registry):
    before = dict(family_registry)

    class _StillABase(_Minimal):
        pass

    assert family_registry == before


def test_a_duplicate_name_is_refused_and_names_both_classes(family_registry):
    load_builtin_families()
    with pytest.raises(RegistryError, match=r"'mmvq' is taken: strata_bench\.families\.mmvq\.Mmvq holds it.*Impostor"):
        class Impostor(_Minimal):
            name = "mmvq"
    assert type(family_registry["mmvq"]).__name__ == "Mmvq"


def test_a_subclass_that_inherits_its_parents_name_is_refused(family_registry):
    from strata_bench.families.dequant import Dequant

    with pytest.raises(RegistryError, match="DequantTweak inherits the name 'dequant' of Dequant"):
        class DequantTweak(Dequant):
            pass
    assert type(family_registry["dequant"]) is Dequant
    assert issubclass(RegistryError, InputError)  # the CLI maps it to exit 2, like any bad input


def _case_file(path, class_name, family_name):
    path.write_text(textwrap.dedent(f"""\
        from strata_bench.kit import Family

        class {class_name}(Family):
            name = "{family_name}"
            def default_cases(self): return []
            def make_inputs(self, case): return {{}}
            def to_device(self, case, host): return {{}}
            def alloc_outputs(self, case, dev): return {{}}
            def reference(self, case, host): return []
        """))
    return path


def test_the_same_case_file_loads_twice(family_registry, tmp_path):
    path = _case_file(tmp_path / "cases.py", "Twice", "twice_demo")
    assert load_user_cases(str(path), str(tmp_path)) == ["twice_demo"]
    first = family_registry["twice_demo"]
    assert load_user_cases(str(path), str(tmp_path)) == ["twice_demo"]
    assert family_registry["twice_demo"] is not first and family_registry["twice_demo"].kernels_root == tmp_path


def test_another_file_cannot_take_a_users_family_name(family_registry, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    load_user_cases(str(_case_file(tmp_path / "a" / "cases.py", "Same", "same_demo")))
    with pytest.raises(RegistryError, match="'same_demo' is taken"):
        load_user_cases(str(_case_file(tmp_path / "b" / "cases.py", "Same", "same_demo")))
