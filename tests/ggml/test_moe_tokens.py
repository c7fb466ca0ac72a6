"""grouped's variant ggml_moe (ggml/moe_tokens.py: mmvq.cu's multi-token mul_mat_vec_q_moe) on the CPU with the
pinned tree: the numbers read from it, the entries as tokens of expert slots, every launch argument, an
emulation of the kernel's indexing that gives every entry its own activation row, expert and output row, the
variant beside ggml on the cases it can run, and a tree without the kernel refused in one line."""
from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest

from strata_bench.ggml import moe_tokens
from strata_bench.ggml.error import MoeErrorModel
from strata_bench.ggml.tree import MMVQ, locate
from strata_bench.ggml.variants import attach

GROUPS = (5, 0, 1, 8, 3, 6, 2, 7, 3)  # grouped's default: 9 experts, 35 entries
BY_5 = (2576980378, 3, 5)  # init_fastdiv_values(5): (2^32 (2^3 - 5)) / 5 + 1, 3, 5


@pytest.fixture(scope="module")
def tree(real_tree):
    return locate(real_tree)


def test_the_numbers_and_paths_are_the_trees(tree):
    assert moe_tokens.lacking(tree) is None
    assert moe_tokens.numbers(tree) == (2, 8)  # rows_per_block, MMVQ_MAX_BATCH_SIZE


@pytest.mark.parametrize("entries,split", [(35, (7, 5)), (64, (8, 8)), (256, (8, 32)), (2, (2, 1)), (12, (6, 2)),
                                           (37, None), (1, None)])
def test_entries_are_tokens_of_expert_slots(entries, split):
    assert moe_tokens.tokens(entries, 8) == split


def _shape(rows, k, block_values, experts=9, entries=35):
    return {"rows": rows, "k": k, "experts": experts, "entries": entries, "block_values": block_values}


def test_the_fused_and_the_down_launch(tree):
    up = moe_tokens.plan(tree, "iq2_xxs", _shape(512, 1024, 256), "W", "XQ", "IDS", "H", gate="G")
    assert (up.kernel, up.grid, up.block, up.shared) == ("mul_mat_vec_q_moe<(ggml_type)16, 2, true>", (256, 5, 1),
                                                         (32, 7, 1), 0)
    values = {p.label: p.value for p in up.params}
    assert [p.label for p in up.params] == [label for label, _ in moe_tokens.SIGNATURE]
    assert values["fusion"] == {"gate": "G", "glu_op": 2} and (values["vx"], values["ids"]) == ("W", "IDS")
    assert [values[k] for k in ("ncols_x", "nchannels_y", "nrows_x", "stride_row_x", "stride_col_y", "stride_col_dst",
                                "stride_channel_x", "stride_channel_y", "stride_channel_dst", "ncols_dst",
                                "ids_stride")] == [1024, BY_5, 512, 4, 5 * 32, 5 * 512, 512 * 4, 32, 512, 7, 5]
    down = moe_tokens.plan(tree, "iq4_nl", _shape(1024, 512, 32), "D", "HQ", "IDS", "Y")
    assert (down.kernel, down.grid, down.block) == ("mul_mat_vec_q_moe<(ggml_type)20, 2, false>", (512, 5, 1),
                                                    (32, 7, 1))
    assert {p.label: p.value for p in down.params}["fusion"] == {}


def test_the_kernels_indexing_gives_each_entry_its_own_row_expert_and_output(tree):
    """The kernel's address arithmetic (mmvq.cu): block y = channel_dst, warp y = token; its expert
    ids[channel_dst + token ids_stride], its activations at channel_y stride_channel_y + token stride_col_y
    (channel_y = channel_dst % nchannels_y), its output at channel_dst stride_channel_dst + token
    stride_col_dst: entry t S + s, in grouped's order."""
    launch = moe_tokens.plan(tree, "iq2_xxs", _shape(512, 1024, 256), "W", "XQ", "IDS", "H", gate="G")
    v = {p.label: p.value for p in launch.params}
    ids = np.repeat(np.arange(9), GROUPS)
    seen = []
    for s in range(launch.grid[1]):
        for t in range(launch.block[1]):
            entry = (s % v["nchannels_y"][2]) * v["stride_channel_y"] // 32 + t * v["stride_col_y"] // 32
            out = (s * v["stride_channel_dst"] + t * v["stride_col_dst"]) // 512
            assert out == entry and ids[s + t * v["ids_stride"]] == ids[entry]
            seen.append(entry)
    assert sorted(seen) == list(range(35))
    assert moe_tokens.readable_rows(tree, 511, 9) == 8 * 511 + 512  # the last block reads row 511 too


@pytest.fixture
def numpy_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(zeros=np.zeros, uint8=np.uint8, asarray=np.asarray))


def test_the_variant_runs_beside_ggml_from_the_same_build(families, tree, numpy_cupy):
    assert "grouped" in attach(families, tree)
    family = families["grouped"]
    variant, unit = family.variant("ggml_moe"), f"{tree.path(MMVQ)}@ggml"
    assert isinstance(variant.error_model, MoeErrorModel) and variant.same_as is None
    assert unit in family.sources and f"{tree.path(MMVQ)}@ggml_moe" not in family.sources
    case = family.expert_case("iq2_xxs", "iq4_nl", 512, 1024, GROUPS)
    assert family.runs(variant, case) and not family.runs(variant, family.expert_case(
        "iq2_xxs", "iq4_nl", 512, 1024, (30, 7)))  # 37 entries: no token split
    names = variant.kernels(family, unit)
    assert "mul_mat_vec_q_moe<(ggml_type)16, 2, true>" in names and "mul_mat_vec_q_moe<(ggml_type)20, 2, false>" in names
    assert all(n.startswith("mul_mat_vec_q_moe<") for n in names) and variant.kernels(family, family.sources[0]) == []
    assert family.name_expressions(unit) == list(dict.fromkeys(family.variant("ggml").kernels(family, unit) + names))
    host = family.make_inputs(case)
    made = variant.prepare(family, case, {k: host[k]["padded"] for k in ("gate", "up", "down")})
    np.testing.assert_array_equal(made["ggml_moe_ids"], np.repeat(np.arange(9, dtype=np.int32), GROUPS))
    assert sorted(made) == ["ggml_moe_gate", "ggml_moe_ids", "ggml_moe_up"]  # iq2_xxs rows: 264 bytes at 272


def test_a_tree_without_the_kernel_keeps_ggml_alone(families, fake_tree):
    faked = locate(fake_tree)
    assert moe_tokens.lacking(faked) == "src/ggml-cuda/mmvq.cu has no __global__ kernel mul_mat_vec_q_moe (an " \
                                        "unsupported ggml version?)"
    attach(families, faked)
    assert [v.name for v in families["grouped"].variants][-1] == "ggml"


def test_a_run_declares_the_moe_variants_foreign():
    from strata_bench.ggml.extension import Ggml
    from strata_bench.report.peer import foreign_variants

    record = Ggml("tree", "tree b").provenance()
    assert record["foreign_variants"] == ["ggml", "ggml_b", "ggml_moe", "ggml_b_moe"]
    assert foreign_variants({"run": {"extensions": {"Ggml": record}}}) == {"ggml", "ggml_b", "ggml_moe", "ggml_b_moe"}


def test_a_second_tree_is_held_to_the_firsts_moe_bits(families, tree):
    attach(families, tree)
    attach(families, tree, "ggml_b", same_as="ggml")
    family = families["grouped"]
    assert [v.name for v in family.variants][-4:] == ["ggml", "ggml_moe", "ggml_b", "ggml_b_moe"]
    assert (family.variant("ggml_b").same_as, family.variant("ggml_b_moe").same_as) == ("ggml", "ggml_moe")
