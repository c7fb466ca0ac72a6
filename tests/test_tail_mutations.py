"""A defect planted in a tail path of a built-in kernel fails that family's default parity (issue 25, item 2).

Each Mutation rewrites one place of kernels_src (the condition of a row of docs/TAIL_PATHS.md, or the line that
row's path runs through) so that the last, partial unit of work (row group, tile, chunk group, thread block,
token tile, warp's blocks) is dropped or cut short, and nothing else changes: a case whose shape is whole gives
the same bits. On the GPU the family's default parity then runs on a copy of kernels_src holding the defect
($STRATA_KERNELS_SRC, as tests/checks/test_diagnosis.py plants one) and must fail, on every case the doc's row
names. A tail case removed from the defaults lets its defect pass: the test fails. On the CPU each mutation is
checked to apply exactly and to name a row of the doc. mmvq_mma's and mmvq_onecol's tails are also planted in their
CPU schedules (tests/families/test_mmvq_mma_tails.py, tests/families/test_mmvq_onecol.py)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

import pytest

from strata_bench.kernels.sources import kernels_dir
from tests.test_tail_paths_doc import TailRow, tail_rows


@dataclass(frozen=True)
class Mutation:
    """`original` (found `count` times in kernels_src/`file`) becomes `mutant`; `condition` names the row of
    docs/TAIL_PATHS.md (family's table) whose tail the defect breaks."""

    family: str
    file: str
    original: str
    mutant: str
    condition: str = ""  # the row's condition, where it is not `original` itself
    count: int = 1

    @property
    def row_condition(self) -> str:
        return self.condition or self.original

    def apply(self, text: str) -> str:
        assert text.count(self.original) == self.count, f"{self.file}: the mutation point moved: {self.original!r}"
        return text.replace(self.original, self.mutant)


def _whole_blocks_only(guard: str, index: str, bound: str) -> tuple[str, str]:
    """A thread-block guard `guard` (if (index >= bound) return;) made to drop the last, partial block whole."""
    return guard, f"if ({index} - threadIdx.x + blockDim.x > {bound}) return;"


M = Mutation
MUTATIONS = (
    M("dequant", "dequant/dequant.cu",
      *_whole_blocks_only("if (t >= (long long)rows * nchunks) return;", "t", "(long long)rows * nchunks")),
    M("q8_1", "q8_1/q8_1.cu", "if (block >= n_blocks) return;",
      "if ((long long)(blockIdx.x + 1) * STRATA_Q8_1_WARPS > n_blocks) return;"),
    M("q8_1", "q8_1/q8_1.cu", *_whole_blocks_only("if (i >= n_blocks * 32) return;", "i", "n_blocks * 32")),
    # mmvq_old: a block with fewer than its 4 rows computes none
    M("mmvq", "mmvq/mmvq.cu", "if (row >= rows) return;",
      "if ((int)(blockIdx.x + 1) * STRATA_MMVQ_OLD_WARPS > rows) return;"),
    # mmvq_new: whole row groups only
    M("mmvq", "mmvq/mmvq.cu",
      "const int groups = (rows + STRATA_MMVQ_NEW_WARPS * R - 1) / (STRATA_MMVQ_NEW_WARPS * R);",
      "const int groups = rows / (STRATA_MMVQ_NEW_WARPS * R);"),
    # mmvq_new: whole lane steps of 32 chunks only (both unroll branches)
    M("mmvq", "mmvq/mmvq.cu", "for (int c = lane; c < nchunks; c += 32)",
      "for (int c = lane; c - lane + 32 <= nchunks; c += 32)", count=2),
    # mmvq_onecol: whole row groups only; whole lane steps of 32 chunks only
    M("mmvq", "mmvq/mmvq_onecol.cu",
      "const int groups = (rows + STRATA_MMVQ_NEW_WARPS * R - 1) / (STRATA_MMVQ_NEW_WARPS * R);",
      "const int groups = rows / (STRATA_MMVQ_NEW_WARPS * R);",
      condition="p[r] = typename D::Ptr(W + (long long)min(row0 + r, rows - 1) * row_stride + walk.first, walk.j);"),
    M("mmvq", "mmvq/mmvq_onecol.cu",
      "for (int c = lane; c < nchunks; c += 32) onecol_step<D, R>(c, xs, tabs, shift, lc, p, acc);",
      "for (int c = lane; c - lane + 32 <= nchunks; c += 32) onecol_step<D, R>(c, xs, tabs, shift, lc, p, acc);"),
    # mmvq_mma: whole 16-row tiles only; whole 8-chunk groups only; whole rounds of the 4 warps' groups only
    M("mmvq", "mmvq/mmvq_mma.cu", "const int tiles = (rows + 15) / 16;", "const int tiles = rows / 16;"),
    M("mmvq", "mmvq/mmvq_mma.cu", "if (c0 + i < nchunks) mma_chunk<F>(group, i, c0 + i, xs, kv, tab, acc[i]);",
      "if (c0 + 8 <= nchunks) mma_chunk<F>(group, i, c0 + i, xs, kv, tab, acc[i]);"),
    M("mmvq", "mmvq/mmvq_mma.cu", "for (int c0 = 8 * q; c0 < nchunks; c0 += 32)",
      "for (int c0 = 8 * q; c0 < nchunks / 32 * 32; c0 += 32)"),
    # grouped new: a window's odd last pass of 1 entry skipped; an expert's last, partial window of several
    # dropped; lanes' partial last step dropped (both passes, both unroll branches). old: the same lane step.
    # tests/families/test_grouped_new.py plants the same defects in a mirror of new's schedule.
    M("grouped", "grouped/grouped.cu", "if (wn & 1) run(Width<1>{}, koff);",
      "if ((wn & 1) && wn > NC) run(Width<1>{}, koff);"),
    M("grouped", "grouped/grouped.cu", "for (int wfirst = begin; wfirst < end; wfirst += NC)",
      "for (int wfirst = begin; wfirst < end && (one_window || wfirst + NC <= end); wfirst += NC)"),
    M("grouped", "grouped/grouped.cu", "for (int c = lane; c < nchunks; c += 32)",
      "for (int c = lane; c - lane + 32 <= nchunks; c += 32)", count=4),
    M("grouped", "grouped/grouped.cu", "for (int c = lane, off = 0; c < nchunks; c += 32, off += LaneWalk<F>::STEP)",
      "for (int c = lane, off = 0; c - lane + 32 <= nchunks; c += 32, off += LaneWalk<F>::STEP)"),
    # q2warp: a warp with fewer than its 4 rows; a group of fewer than 16 blocks; the exact layout's last round
    M("q2warp", "q2warp/q2warp.cu", "if (rs.row0 >= rows) return;",
      "if (rs.row0 + STRATA_Q2WARP_ROWS_PER_WARP > rows) return;"),
    M("q2warp", "q2warp/q2warp.cu", "if (h < nh) {", "if (h < nh && (g + 1) * kGroupHalves <= nh) {"),
    M("q2warp", "q2warp/q2warp.cu", "for (int h = t; h < nh; h += kOldThreads)",
      "for (int h = t; h - t + kOldThreads <= nh; h += kOldThreads)"),
    # pfgemm: a block of fewer than 128 weight rows; the last K chunk run as a whole one; a partial token tile's
    # rows never stored; a token fragment of fewer than 16 rows taken for empty
    M("pfgemm", "pfgemm/pfgemm_old.cu", "const bool warp_has_rows = 16 * warp < rows_valid;",
      "const bool warp_has_rows = 16 * warp < rows_valid && rows_valid == OLD_ROWS;"),
    M("pfgemm", "pfgemm/pfgemm_old.cu", "for (int ks = 0; ks < kc / 16; ++ks)",
      "for (int ks = 0; ks < OLD_KC / 16; ++ks)"),
    M("pfgemm", "pfgemm/pf_common.cuh", "if (t0 + r < row_end) Y[(size_t)(t0 + r) * N + n + c] = scratch[e];",
      "if (t0 + WMMA_TILE <= row_end) Y[(size_t)(t0 + r) * N + n + c] = scratch[e];",
      condition="if (t0 + r < row_end)"),
    M("pfgemm", "pfgemm/pfgemm_new.cu",
      "const int live_frags = min(2, max(0, (row_end - row0 - 32 * wt + 15) / 16));",
      "const int live_frags = min(2, max(0, (row_end - row0 - 32 * wt) / 16));"),
    # fp16deq: the last, partial thread block of each kernel does nothing (generic: both formats)
    M("fp16deq", "fp16deq/fp16deq.cu",
      *_whole_blocks_only("if (gid >= (long long)nrows * groups) return;", "gid", "(long long)nrows * groups"),
      count=2),
    M("fp16deq", "fp16deq/fp16deq.cu",
      *_whole_blocks_only("if (tid >= (long long)nrows * octets) return;", "tid", "(long long)nrows * octets")),
    M("fp16deq", "fp16deq/fp16deq.cu", "if (blk < blocks) xs_own<HALVES>",
      "if (blk < blocks && tid - threadIdx.x + blockDim.x <= blocks * PER_BLOCK) xs_own<HALVES>"),
    # swiglu_q8: old's partial blocks; the fused kernel's warp of fewer than 4 blocks, and block of fewer than 32
    M("swiglu_q8", "swiglu_q8/swiglu_q8.cu",
      *_whole_blocks_only("if (i >= (long long)T * F) return;", "i", "(long long)T * F")),
    M("swiglu_q8", "swiglu_q8/swiglu_q8.cu", "if (blk >= (long long)T * (F / 32)) return;",
      "if ((blockIdx.x + 1) * (long long)swiglu::kWarps > (long long)T * (F / 32)) return;"),
    M("swiglu_q8", "swiglu_q8/swiglu_q8.cu", "if (first + b < nblocks) quantize_q8_1_lane",
      "if (first + kBlocksPerWarp <= nblocks) quantize_q8_1_lane",
      condition="if (first + b < nblocks) quantize_q8_1_lane(silu_mul(g[b], u[b]), q + first + b, lane);"),
    M("swiglu_q8", "swiglu_q8/swiglu_q8.cu", "if (blk < nblocks) {",
      "if (blk < nblocks && (blockIdx.x + 1) * (long long)(kWarps * kBlocksPerWarp) <= nblocks) {"),
    # moe_combine: the fused kernel writes 8 values a thread, as if EPT were always 8 (H = 2048)
    M("moe_combine", "moe_combine/moe_combine.cu",
      "for (int m = 0; m < EPT; ++m) {\n        const int i = threadIdx.x + kThreads * m;\n        write_norm",
      "for (int m = 0; m < 8; ++m) {\n        const int i = threadIdx.x + kThreads * m;\n        write_norm",
      condition="constexpr int H = kThreads * EPT;"),
)
IDS = [f"{m.family}:{m.row_condition[:48]}" for m in MUTATIONS]


def doc_row(m: Mutation) -> TailRow:
    """The row of docs/TAIL_PATHS.md whose tail `m` breaks."""
    rows = [r for r in tail_rows() if r.family == m.family and m.row_condition in r.conditions]
    assert len(rows) == 1, f"{m.family}: {len(rows)} rows of docs/TAIL_PATHS.md quote {m.row_condition!r}"
    return rows[0]


@pytest.mark.parametrize("m", MUTATIONS, ids=IDS)
def test_each_mutation_applies_once_in_its_file_and_names_a_tail_with_cases(m):
    text = (kernels_dir() / m.file).read_text()
    mutated = m.apply(text)
    assert mutated != text and m.mutant in mutated
    row = doc_row(m)
    assert row.cases and row.file.endswith(m.file), row


def test_every_tail_quoted_in_kernels_src_that_names_cases_and_drops_work_has_a_mutation():
    # The rows left without one: one column and the widest (no partial unit to drop), q2warp's idle chunks
    # (their +0 changes no bit a case can see), moe_combine's one token, and grouped's empty expert (its early
    # return only saves work; tests/families/test_grouped_new.py lists the cases that reach it).
    broken = {(m.family, doc_row(m).path) for m in MUTATIONS}
    rows = [r for r in tail_rows() if r.cases and r.file.startswith("kernels_src/")]
    without = sorted(r.path for r in rows if (r.family, r.path) not in broken)
    assert without == ["an expert with no entries (new: the whole block returns before its first barrier)",
                       "fewer than 4 groups (chunks with no half-block add +0)",
                       "one activation row; the widest (11, mmvq's most columns)", "one column; the widest (4)",
                       "one row; the longest (4113 rows)",
                       "one token", "one token row (a group of 1); the widest group (129)"]


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    """One cubin and reference cache for every mutated run: only the mutated source compiles again."""
    return os.environ.get("STRATA_CACHE_DIR") or str(tmp_path_factory.mktemp("mutation-cache"))


@pytest.mark.gpu
@pytest.mark.parametrize("m", MUTATIONS, ids=IDS)
def test_a_defect_in_a_tail_path_fails_the_familys_default_parity(m, tmp_path, shared_cache):
    copy = tmp_path / "kernels_src"
    shutil.copytree(kernels_dir(), copy)
    target = copy / m.file
    target.write_text(m.apply(target.read_text()))
    env = {**os.environ, "STRATA_KERNELS_SRC": str(copy), "STRATA_CACHE_DIR": shared_cache}
    proc = subprocess.run([sys.executable, "-m", "strata_bench", "parity", "--family", m.family, "--output", "json",
                           "-q", "--results", str(tmp_path / "results")],
                          capture_output=True, text=True, timeout=400, env=env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    failed = {c["case"] for c in json.loads(proc.stdout)["cases"] if c["status"] != "PASS"}
    missed = [name for name in doc_row(m).cases if name not in failed]
    assert not missed, f"the defect passed on {missed}; failed: {sorted(failed)[:20]}"
