"""The default mmvq cases reach every tail path of mmvq_mma.cu's schedule (issue 25, item 2; docs/TAIL_PATHS.md):
tests/iq_host/mma_emul.h runs the schedule with a defect planted in one tail path (MMA_EMUL_DEFECT) on the data of
every default case whose 8-column pass runs mmvq_mma, and exactly the cases that reach that path must come out
with other bits than the correct schedule (which gives mmvq_old's bits). Drop a tail case from the default list
and its defect passes unseen: the test fails.

The schedule runs on a case's last two tiles only (at most 32 rows): tiles are independent and the window starts
on a tile boundary, with the same last row to clamp to, so its outputs are those rows' outputs of the whole case
(a defect in a chunk path shows in every tile, one in the last tile there)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from strata_bench.families import load_builtin_families
from strata_bench.families.mmvq_mma import MMA_WIDTH, mma_config
from tests.stub_kernels import H200_SHARED_OPTIN

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from iq_host import harness

FAMILY = load_builtin_families()["mmvq"]
TAILS = ["mmvq/iq4_nl/32773x288/n8/seed:1", "mmvq/iq4_xs/32773x256/n8/seed:1", "mmvq/q8_0/131077x288/n8/seed:1"]
# in KERNEL_FORMATS' order (iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m come before iq4_nl): the super-block
# formats' tails, one super-block of a last tile of 5 rows
SUPER_TAILS = {f: f"mmvq/{f}/{'131077' if f in ('iq2_xxs', 'iq1_s') else '32773'}x256/n8/seed:1"
               for f in ("iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m")}
# defect -> the default cases (their n8 or first listed name per weight set) whose data must expose it
EXPOSED_BY = {
    "tail_tile": [*SUPER_TAILS.values(), *TAILS],  # 32773 and 131077 rows: a last tile of 5 rows
    "partial_group": [TAILS[0], TAILS[2]],  # 9 chunks: a last group of 1 chunk (iq4_xs has whole super-blocks)
    # 8 or 9 chunks: warps 2-3 no group
    # (iq1_m's one-column weight set at 131072 x 256 too: its 11-column case's 8-column pass)
    "partial_round": [*SUPER_TAILS.values(), "mmvq/iq1_m/131072x256/n11/seed:1", *TAILS[:2],
                      "mmvq/q8_0/131072x256/n8/seed:1", TAILS[2]],
}


def mma_weight_sets() -> list:
    """The first default case of each weight set (format, shape, data) whose 8-column pass runs mmvq_mma."""
    seen, out = set(), []
    for case in FAMILY.default_cases():
        key = (case.fmt, case.rows, case.cols, case.data)
        runs_mma = case.ncols >= MMA_WIDTH and mma_config(case.fmt, MMA_WIDTH, case.rows, case.cols // 32, lambda: 9,
                                                          lambda: H200_SHARED_OPTIN)
        if runs_mma and key not in seen:
            seen.add(key)
            out.append(case)
    return out


def last_two_tiles(case) -> tuple[np.ndarray, np.ndarray]:
    """The case's raw weights from the start of its second-to-last 16-row tile, and its first 8 columns' q8_1
    activations (the 8-column pass)."""
    host = FAMILY.make_inputs(case)
    start = max(0, ((case.rows - 1) // 16 - 1) * 16)
    return host["raw"][start:], host["act"][:MMA_WIDTH]


@pytest.fixture(scope="module")
def windows() -> dict:
    """Per weight set: (its case, raw window, activations, the correct schedule's y)."""
    out = {}
    for case in mma_weight_sets():
        raw, act = last_two_tiles(case)
        out[case.name] = (case, raw, act, harness.run_dot(case.fmt, raw, case.cols, act, mode="dot_mma"))
    return out


def test_the_default_mma_cases_are_the_listed_shapes_and_tails():
    names = [c.name for c in mma_weight_sets()]
    tall = {f: tail.replace("131077x256", "131072x1024").replace("32773x256", "32768x1024")
            for f, tail in SUPER_TAILS.items()}
    assert names == [*(name for f in SUPER_TAILS for name in (tall[f], SUPER_TAILS[f])),
                     "mmvq/iq1_m/131072x256/n11/seed:1",  # mmvq.ONECOL_SHAPES: its 11 columns' 8-column pass
                     "mmvq/iq4_nl/32768x1024/n8/seed:1", TAILS[0],
                     "mmvq/iq4_xs/32768x1024/n8/seed:1", TAILS[1], "mmvq/q8_0/131072x256/n8/seed:1", TAILS[2]]
    assert tall["iq1_m"] == "mmvq/iq1_m/32768x1024/n8/seed:1" and tall["iq1_s"] == "mmvq/iq1_s/131072x1024/n8/seed:1"


def test_the_correct_schedule_gives_the_one_warp_per_row_bits_on_every_window(windows):
    for case, raw, act, mma in windows.values():
        old = harness.run_dot(case.fmt, raw, case.cols, act)
        assert np.array_equal(old.view(np.uint32), mma.view(np.uint32)), case.name


@pytest.mark.parametrize("defect", sorted(EXPOSED_BY))
def test_a_defect_in_each_tail_path_changes_the_bits_of_exactly_its_cases(windows, defect):
    exposed = []
    for case, raw, act, good in windows.values():
        bad = harness.run_dot(case.fmt, raw, case.cols, act, mode="dot_mma", defect=defect)
        if not np.array_equal(bad.view(np.uint32), good.view(np.uint32)):
            exposed.append(case.name)
    assert exposed == EXPOSED_BY[defect]
