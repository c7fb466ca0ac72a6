"""The shared constants: the committed header matches constants.py, the kernels spell them through its
macros (not as literals beside them), and Python's block shapes agree with the format registry."""
from __future__ import annotations

import re

import pytest

from strata_bench.formats import get_format
from strata_bench.kernels import constants
from strata_bench.kernels.sources import kernels_dir, source_files

# Where a kernel used to hard-code a shared number: the spelling that must not come back. Each entry is
# (file under kernels_src, regex of the old literal spelling).
RETIRED_LITERALS = [
    ("q8_1/q8_1.cu", r"#define\s+Q8_1_WARPS\s+\d"),
    ("mmvq/mmvq.cu", r"#define\s+MMVQ_(OLD|NEW)_WARPS\s+\d"),
    ("grouped/grouped.cu", r"#define\s+GROUPED_(WARPS|ENTRIES)\s+\d"),
    ("dequant/dequant.cu", r"__launch_bounds__\(\s*\d+\s*\)"),
    ("swiglu_q8/swiglu_q8.cu", r"__launch_bounds__\(\s*\d+\s*\)"),
    ("swiglu_q8/swiglu_q8.cu", r"constexpr int (kWarps|kBlocksPerWarp) = \d"),
    ("moe_combine/moe_combine.cu", r"constexpr int (kThreads|kResidual) = \d"),
    ("fp16deq/fp16deq.cu", r"constexpr int (kThreads|kQ8Bytes|kXsBytes) = \d"),
    ("pfgemm/pf_common.cuh", r"constexpr int (FMT_\w+|\w+_BYTES) = \d"),
    ("pfgemm/pfgemm_old.cu", r"constexpr int OLD_(ROWS|TILE_ROWS|THREADS) = \d"),
    ("pfgemm/pfgemm_new.cu", r"constexpr int NEW_(ROWS|TILE_ROWS|THREADS) = \d"),
    ("q2warp/q2warp.cu", r"constexpr int (kOldThreads|kSlotGranules|kBlockBytes|kQ81Bytes) = \d"),
    ("q2warp/q2warp.cu", r"\br < 4\b|\[4 \* kSlotGranules\]|p\[4\]\[NCOLS\]"),
    ("common/iq_decode.cuh", r"\bBYTES = \d|TABLE_WORDS = (\d|STRATA_\w+_SIZE)"),
]


def _kernel_texts() -> dict[str, str]:
    root = kernels_dir()
    return {p.relative_to(root).as_posix(): p.read_text() for p in source_files(root)
            if p.relative_to(root).as_posix() != constants.HEADER_RELPATH}


def test_committed_header_is_current():
    assert constants.is_current(), "run `python -m strata_bench.kernels.constants` and commit the header"
    assert constants.main(["--check"]) == 0


def test_stale_header_is_detected(tmp_path):
    constants.write_header(tmp_path)
    assert constants.is_current(tmp_path)
    path = constants.header_path(tmp_path)
    path.write_text(path.read_text().replace("#define STRATA_MMVQ_NEW_WARPS 8", "#define STRATA_MMVQ_NEW_WARPS 4"))
    assert not constants.is_current(tmp_path)


def test_header_defines_every_value_of_the_module():
    text = constants.header_path().read_text()
    defined = {m.group(1): int(m.group(2)) for m in re.finditer(r"^#define (\w+) (\d+)$", text, re.M)}
    assert defined == constants.macros()
    assert defined["STRATA_MMVQ_NEW_WARPS"] == constants.MMVQ_NEW_WARPS
    assert defined["STRATA_IQ2_S_BYTES"] == 82 and defined["STRATA_PFGEMM_FMT_Q2_0"] == 2


def test_no_kernel_redefines_a_shared_macro():
    names = set(constants.macros())
    for rel, text in _kernel_texts().items():
        for m in re.finditer(r"^\s*#\s*define\s+(\w+)", text, re.M):
            assert m.group(1) not in names, f"{rel} defines {m.group(1)}, which the generated header owns"


def test_every_scalar_macro_is_used_by_a_kernel():
    # A macro no kernel reads would mean a literal is doing its job again somewhere.
    # Q2WARP_NEW_WARPS reaches the kernel as the NWARPS template argument of the name expression.
    text = "\n".join(_kernel_texts().values())
    unused = [f"STRATA_{name}" for name in constants.SCALARS
              if f"STRATA_{name}" not in text and name != "Q2WARP_NEW_WARPS"]
    assert not unused, unused


@pytest.mark.parametrize("rel,pattern", RETIRED_LITERALS, ids=[f"{r}:{p[:24]}" for r, p in RETIRED_LITERALS])
def test_retired_literal_is_gone(rel, pattern):
    text = _kernel_texts()[rel]
    hit = re.search(pattern, text)
    assert hit is None, f"{rel} hard-codes {hit.group(0)!r}: use the macro from generated/strata_constants.cuh"


def test_block_shapes_match_the_format_registry():
    for fmt, (values, nbytes) in constants.BLOCK_SHAPES.items():
        if fmt == "q8_1":
            assert (values, nbytes) == (32, 36)  # block_q8_1: two fp16 and 32 int8
            continue
        spec = get_format(fmt)
        assert (spec.block_size, spec.type_size) == (values, nbytes), fmt


def test_derived_python_values():
    assert constants.SWIGLU_GRANULE == {"q2_0": 64, "iq4_nl": 32, "q8_0": 32}
    assert constants.Q2WARP_STATIC_SHARED_BYTES == 4 * 4 * 20 * 16
    assert sorted(constants.PFGEMM_FORMAT_IDS.values()) == [0, 1, 2]


def test_table_words_match_the_generated_tables():
    from strata_bench.kernels import tables

    sizes = {name: len(values) for name, (_, values) in tables.table_arrays().items()}
    table_of = {"iq2_xxs": "iq2xxs_grid_nib", "iq2_xs": "iq2xs_grid_nib", "iq2_s": "iq2s_grid_nib",
                "iq3_xxs": "iq3xxs_grid", "iq3_s": "iq3s_grid", "iq1_s": "iq1s_grid_nib", "iq1_m": "iq1s_grid_nib",
                "iq4_nl": "kvalues_iq4nl_u32", "iq4_xs": "kvalues_iq4nl_u32"}
    for fmt, words in constants.TABLE_WORDS.items():
        assert words == sizes.get(table_of.get(fmt), 0), fmt
