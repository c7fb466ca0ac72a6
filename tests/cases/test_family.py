"""cases.family: the variant table, the derived compile list, the case constructor, the hooks' defaults."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from strata_bench.cases import Case, Family, Variant

from strata_bench.families import load_builtin_families
from strata_bench.errors import InputError

PACKAGE = Path(__file__).resolve().parents[2] / "strata_bench"
# `if variant == ...`, `elif variant != ...`, `if variant in/not in ...`: dispatch on a variant's name.
DISPATCH = re.compile(r"\b(el)?if\s+\(?\s*variant\s*(==|!=|not\s+in\b|in\b)")


def test_no_module_dispatches_on_a_variant_name():
    # Variants are table entries; a comparison against a variant name is dispatch that bypasses the table.
    pattern = DISPATCH
    hits = [f"{p.relative_to(PACKAGE.parent)}:{i}: {line.strip()}"
            for p in sorted(PACKAGE.rglob("*.py"))
            for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert hits == []


def test_the_dispatch_grep_finds_what_it_forbids():
    pattern = DISPATCH
    assert pattern.search('        if variant == "old":') and pattern.search('elif variant == "new":')
    assert pattern.search("if variant not in VARIANTS:") and not pattern.search("for variant in case.variants:")


def _launch_a(family, case, kernels, dev, outs, stream=None):
    kernels.append(("a", case.name))


def _launch_b(family, case, kernels, dev, outs, stream=None):
    kernels.append(("b", case.name))


class _Two(Family):
    """Unnamed (not registered): two variants over two sources and one family-wide kernel."""

    sources = ("shared.cu", "own.cu")
    variants = (Variant("a", lambda fam, src: ["k_a", "k_common"] if src == "own.cu" else [], _launch_a),
                Variant("b", lambda fam, src: ["k_common", "k_b"] if src == "own.cu" else [], _launch_b))

    def family_kernels(self, source):
        return ["prep"] if source == "shared.cu" else []

    def default_cases(self): return [self.case("f32", 4, 32)]
    def make_inputs(self, case): return {}
    def to_device(self, case, host): return {}
    def alloc_outputs(self, case, dev): return {}
    def reference(self, case, host): return []


def test_compile_list_is_the_family_kernels_then_each_variants_once():
    fam = _Two()
    assert fam.name_expressions("shared.cu") == ["prep"]
    assert fam.name_expressions("own.cu") == ["k_a", "k_common", "k_b"]


def test_launch_runs_the_table_entry_and_an_unknown_name_lists_the_known_ones():
    fam, calls = _Two(), []
    case = fam.case("f32", 4, 32)
    fam.launch(case, "b", calls, {}, {})
    assert calls == [("b", case.name)]
    with pytest.raises(InputError, match=r"unknown variant 'c' \(a, b\)"):
        fam.launch(case, "c", calls, {}, {})


def test_case_fills_the_family_and_its_default_variants():
    mmvq = load_builtin_families()["mmvq"]
    case = mmvq.case("iq2_xxs", 64, 256, 2, "seed:3", col=1)
    assert case == Case("mmvq", "iq2_xxs", 64, 256, 2, "seed:3", ("old", "new"), (("col", 1),))
    assert case.name == "mmvq/iq2_xxs/64x256/n2/seed:3/col=1"
    assert load_builtin_families()["dequant"].case("q8_0", 8, 64).variants == ("dequant",)
    with pytest.raises(InputError, match="unknown variant 'newer'"):
        mmvq.case("iq2_xxs", 64, 256, variants=("old", "newer"))


def test_every_hook_is_declared_on_the_base_with_a_docstring():
    hooks = ("bench_cases", "compared_outputs", "related_cases", "output_values", "written_mask", "errors_must_match",
             "describe_index", "bytes_moved", "flops", "allows_nonfinite", "family_kernels", "name_expressions",
             "launch", "case", "variant")
    for hook in hooks:
        assert hook in vars(Family) and vars(Family)[hook].__doc__, hook
    assert "kernels_root" in vars(Family) and Family.kernels_root is None


def test_hook_defaults():
    fam = _Two()
    case = fam.case("f32", 4, 32)
    assert fam.compared_outputs(case) is None and fam.related_cases(case) == [] and fam.written_mask(case, "y") is None
    assert fam.allows_nonfinite(case, "y") is False and fam.errors_must_match(case) is False
    assert fam.describe_index(case, "y", (1, 2)) == "index 1,2"
    assert fam.bytes_moved(case) == 0 and fam.flops(case) == 0
    outs = {"y": np.ones(2, np.float32)}
    assert fam.output_values(case, "y", outs) is outs["y"]  # as it is: parity's check reads it as float64
    assert fam.bench_cases() == [case]


def test_every_built_in_variant_is_table_data_and_parity_runs_it():
    for name, fam in load_builtin_families().items():
        assert fam.variants, name
        assert all(isinstance(v, Variant) for v in fam.variants), name
        cases = list(fam.default_cases())
        # A variant in the table that no default case lists would never be proved by a plain `parity`.
        assert {v for case in cases for v in case.variants} == {v.name for v in fam.variants}, name
        # Every case is compared against the same baseline: the table's first entry.
        assert {case.variants[0] for case in cases} == {fam.variants[0].name}, name


class _Foreign(_Two):
    """Own formats f32 and f16; a foreign variant for f16 and q9 (a format only it has), which also makes
    a device input of its own."""

    own_formats = ("f32", "f16")
    variants = (*_Two.variants,
                Variant("eng", lambda fam, src: [], _launch_b, formats=("f16", "q9"),
                        prepare=lambda fam, case, dev: {"packed": ("packed", case.fmt, sorted(dev))}))

    def to_device(self, case, host): return {"w": "own"}


def test_a_variant_runs_its_declared_formats_and_the_built_ins_only_the_familys_own():
    fam = _Foreign()
    assert fam.case("f32", 4, 32).variants == ("a", "b")
    assert fam.case("f16", 4, 32).variants == ("a", "b", "eng")
    assert fam.case("q9", 4, 32).variants == ("eng",)
    assert fam.foreign_formats() == ("q9",)
    assert _Two().foreign_formats() == () and _Two().case("q9", 4, 32).variants == ("a", "b")
    # An explicit variant list is taken as given (a user's --variants filter is checked elsewhere).
    assert fam.case("q9", 4, 32, variants=("a",)).variants == ("a",)


def test_device_inputs_add_what_each_listed_variant_prepares_and_nothing_for_others():
    fam = _Foreign()
    assert fam.device_inputs(fam.case("f32", 4, 32), {}) == {"w": "own"}
    assert fam.device_inputs(fam.case("q9", 4, 32), {}) == {"w": "own", "packed": ("packed", "q9", ["w"])}
