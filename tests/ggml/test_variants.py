"""variants.attach on a written tree (no nvcc, no GPU): the variant each family gets, the kernels it lists
from its own source, the weights it packs for itself, the launch it makes; ggml_b held to ggml's bits.
Each test attaches to a run's own catalog (tests/conftest.py `families`)."""
from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest

from strata_bench.errors import InputError
from strata_bench.ggml import convert, glu, mmvq
from strata_bench.ggml.tree import CONVERT, MMVQ, QUANTIZE, locate
from strata_bench.ggml.variants import attach




@pytest.fixture
def tree(fake_tree):
    return locate(fake_tree)


@pytest.fixture
def numpy_cupy(monkeypatch):
    """packed_rows' cupy: numpy (the copy it makes is the same)."""
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(zeros=np.zeros, uint8=np.uint8))


def test_each_family_gets_variant_ggml_from_its_own_source(families, tree):
    assert attach(families, tree) == ["mmvq", "dequant", "q8_1", "fp16deq", "grouped", "swiglu_q8", "moe_combine"]
    units = {name: f"{tree.root / source}@ggml" for name, source in
             (("mmvq", MMVQ), ("dequant", CONVERT), ("q8_1", QUANTIZE))}
    for name, unit in units.items():
        family = families[name]
        variant = family.variant("ggml")
        assert unit in family.sources and variant.same_as is None
        assert variant.kernels(family, family.sources[0]) == []
    m = families["mmvq"].variant("ggml")
    assert m.formats == ("q8_0", "q4_k", "iq2_xxs", "iq3_s", "iq1_s")
    assert m.error_model.formats == ("q8_0", "iq2_xxs", "iq3_s", "iq1_s")  # q4_k: the family's bound alone
    assert m.kernels(families["mmvq"], units["mmvq"]) == mmvq.instances(tree, m.formats)
    assert m.description == "llama.cpp's mul_mat_vec_q, ggml 0.9.4"
    mm = families["mmvq"]
    assert m.applies(mm.case("q8_0", 64, 256, 8)) and not m.applies(mm.case("q8_0", 64, 256, 9))
    d = families["dequant"].variant("ggml")
    assert d.formats == m.formats and d.error_model is None
    assert d.kernels(families["dequant"], units["dequant"]) == [convert.dequant_kernel(f) for f in m.formats]
    q = families["q8_1"].variant("ggml")
    assert (q.formats, q.prepare) == (None, None)
    assert q.kernels(families["q8_1"], units["q8_1"]) == ["quantize_q8_1"]


def test_a_trees_sources_compile_only_the_ggml_variants_kernels(families, tree):
    """The built-in variants' kernels are never asked of ggml's sources: swiglu_q8's and moe_combine's name
    their kernels whatever the source (nvcc's cubin of unary.cu was searched for swiglu_h_f32)."""
    attach(families, tree)
    for name in ("mmvq", "dequant", "q8_1", "fp16deq", "grouped", "swiglu_q8", "moe_combine"):
        family = families[name]
        variant = family.variant("ggml")
        for source in family.sources:
            if source not in type(family).sources:
                assert family.name_expressions(source) == list(dict.fromkeys(variant.kernels(family, source)))
    swiglu = families["swiglu_q8"]
    assert swiglu.name_expressions(f"{tree.root / 'src/ggml-cuda/unary.cu'}@ggml") == [glu.NAME]
    assert "swiglu_h_f32" in swiglu.name_expressions(type(swiglu).sources[0])  # its own source keeps its own


def test_a_second_tree_is_held_to_the_first(families, tree, fake_tree, tmp_path):
    from tests.ggml_trees import write_fake_tree

    branch = locate(write_fake_tree(tmp_path / "branch" / "ggml"))
    attach(families, tree)
    attach(families, branch, "ggml_b", same_as="ggml")
    for name in ("mmvq", "dequant", "q8_1"):
        assert families[name].variant("ggml_b").same_as == "ggml"
    assert f"{branch.root / MMVQ}@ggml_b" in families["mmvq"].sources
    with pytest.raises(InputError) as err:
        attach(families, tree)
    assert str(err.value) == "mmvq already has a variant named 'ggml' (old, new, ggml, ggml_b)"


def test_families_not_loaded(tree):
    with pytest.raises(InputError) as err:
        attach({"mmvq": object()}, tree)
    assert str(err.value) == "--ggml: the families dequant, q8_1, fp16deq, grouped, swiglu_q8, moe_combine are not loaded"


def test_mmvq_packs_rows_only_where_ggml_would_read_past_them(families, tree, numpy_cupy):
    attach(families, tree)
    family, prepare = families["mmvq"], families["mmvq"].variant("ggml").prepare
    # 64 rows of 1056 bytes at 1056: nothing to pack
    assert prepare(family, family.case("iq2_xxs", 64, 4096, 5), {"w": np.zeros(64 * 1056, np.uint8)}) == {}
    # 67 rows at 5 columns: 2 rows per CUDA block, so a 68th (zero) row is read
    w = np.arange(67 * 1056, dtype=np.int64).astype(np.uint8)
    packed = prepare(family, family.case("iq2_xxs", 67, 4096, 5), {"w": w})["ggml_w"]
    assert packed.shape == (68, 1056)
    np.testing.assert_array_equal(packed[:67].reshape(-1), w)
    assert not packed[67].any()
    # 256 values of iq2_xxs: 66 bytes of blocks in rows 80 bytes apart, packed at 66
    w = np.arange(3 * 80, dtype=np.uint8)
    packed = prepare(family, family.case("iq2_xxs", 3, 256, 2), {"w": w})["ggml_w"]
    assert packed.shape == (4, 66)
    np.testing.assert_array_equal(packed[:3], w.reshape(3, 80)[:, :66])


def test_mmvq_launch_quantizes_then_launches_ggmls_instance(families, tree):
    attach(families, tree)
    family, variant = families["mmvq"], families["mmvq"].variant("ggml")
    calls = []
    fam = SimpleNamespace(quantize_activations=lambda case, kernels, dev, stream: calls.append("q8_1"))

    def in_source(unit, name):
        assert unit == f"{tree.root / MMVQ}@ggml"
        return lambda grid, block, args, stream=None: calls.append((name, grid, block, args[0], args[7]))

    case = family.case("iq2_xxs", 67, 4096, 5)
    dev = {"w": np.zeros(67 * 1056, np.uint8), "xq": np.zeros(5 * 128 * 36, np.uint8)}
    dev["ggml_w"] = np.zeros((68, 1056), np.uint8)
    variant.launch(fam, case, SimpleNamespace(in_source=in_source), dev, {"y": np.zeros((5, 67), np.float32)})
    assert calls == ["q8_1", ("mul_mat_vec_q<(ggml_type)16, 5, false, false, false>", (34, 1, 1), (32, 2, 1),
                              dev["ggml_w"], np.uint32(16))]


def test_dequant_packs_padded_rows(families, tree, numpy_cupy):
    attach(families, tree)
    family = families["dequant"]
    prepare = family.variant("ggml").prepare
    fields = family.launch_abi().fields(family.case("q8_0", 3, 288, 1))
    w = np.arange(3 * fields["stride"], dtype=np.int64).astype(np.uint8)
    packed = prepare(family, family.case("q8_0", 3, 288, 1), {"w": w})["ggml_w"]
    assert packed.shape == (3, 306)
    np.testing.assert_array_equal(packed, w.reshape(3, -1)[:, :306])


class _OnDevice:
    """A device array's stand-in: only the device it is on."""

    def __init__(self, cc):
        self.device = SimpleNamespace(compute_capability=cc)


@pytest.mark.parametrize("cc,refused", [("75", "7.5"), ("121", "12.1"), ("90", None), ("80", None), ("120", None)])
def test_mmvq_refuses_a_device_whose_table_is_not_the_generic_one(families, tree, cc, refused):
    attach(families, tree)
    family, prepare = families["mmvq"], families["mmvq"].variant("ggml").prepare
    case = family.case("iq2_xxs", 64, 4096, 5)  # nothing to pack: only the device is looked at
    if refused is None:
        assert prepare(family, case, {"w": _OnDevice(cc)}) == {}
        return
    with pytest.raises(InputError) as err:
        prepare(family, case, {"w": _OnDevice(cc)})
    assert str(err.value) == (f"--ggml: ggml launches mul_mat_vec_q with its own table on compute capability "
                              f"{refused}; the adapter writes only the GENERIC one (8.0 and newer, not 12.1)")
