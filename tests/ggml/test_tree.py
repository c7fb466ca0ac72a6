"""tree.locate on a written ggml tree (found from ggml/ or the checkout; version, type ids, QR, VDR and
formats as written; the content hash; each bad tree one InputError line) and on the pinned real one."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from strata_bench.errors import InputError
from strata_bench.ggml.tree import CONVERT, MMVQ, QUANTIZE, SIGNATURES, locate, tree_hash

FAKE = {"version": "0.9.4",
        "type_ids": {"q8_0": 8, "q4_k": 12, "iq2_xxs": 16, "iq3_s": 21, "iq1_s": 19, "iq4_xs": 23},
        "qr": {"q8_0": 1, "q4_k": 2, "iq2_xxs": 4, "iq3_s": 4, "iq1_s": 8},
        "vdr": {"q8_0": 2, "q4_k": 2, "iq2_xxs": 2, "iq3_s": 2, "iq1_s": 1},
        "formats": ("q8_0", "q4_k", "iq2_xxs", "iq3_s", "iq1_s")}


def _error(path, option="--ggml") -> str:
    with pytest.raises(InputError) as err:
        locate(path, option)
    assert "\n" not in str(err.value)
    return str(err.value)


def _append(path) -> None:
    """One more line at the end of `path` (made, with its folders, where it is not)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write("// one more line\n")


@pytest.mark.parametrize("where", ["ggml", "checkout"])
def test_a_tree_is_found_from_its_ggml_folder_and_from_the_checkout(fake_tree, where):
    tree = locate(fake_tree if where == "ggml" else fake_tree.parent)
    assert tree.root == fake_tree.resolve()
    assert (tree.version, tree.type_ids, tree.qr, tree.vdr, tree.formats) == (
        FAKE["version"], FAKE["type_ids"], FAKE["qr"], FAKE["vdr"], FAKE["formats"])
    assert tree.record() == {"path": str(fake_tree.resolve()), "version": "0.9.4", "sha256": tree.content_hash}
    assert re.fullmatch(r"[0-9a-f]{64}", tree.content_hash)


@pytest.mark.parametrize("changed", ["CMakeLists.txt", "include/ggml.h", "src/ggml-common.h", "src/ggml-impl.h",
                                     "src/ggml-cuda/common.cuh", "src/ggml-cuda/vecdotq.cuh", MMVQ,
                                     "src/ggml-cuda/template-instances/mmvq-instance.cu"])
def test_the_content_hash_follows_every_file_a_build_reads(fake_tree, changed):
    before = tree_hash(fake_tree)
    _append(fake_tree / changed)
    assert tree_hash(fake_tree) != before


@pytest.mark.parametrize("unrelated", ["README.md", "src/ggml-cpu/ops.h", "src/ggml-cpu/new.cpp", "src/ggml.c",
                                       "docs/notes.txt"])
def test_the_content_hash_ignores_what_no_cuda_build_reads(fake_tree, unrelated):
    before = tree_hash(fake_tree)
    _append(fake_tree / unrelated)
    assert tree_hash(fake_tree) == before


def test_the_content_hash_does_not_depend_on_where_the_tree_is(fake_tree, tmp_path):
    copy = shutil.copytree(fake_tree, tmp_path / "elsewhere" / "ggml")
    assert locate(copy).content_hash == locate(fake_tree).content_hash


def test_a_tree_under_a_folder_named_ggml_cuda_hashes_the_same_files(fake_tree, tmp_path):
    # The folders are the tree's own: a parent folder's name does not widen what is hashed.
    copy = Path(shutil.copytree(fake_tree, tmp_path / "ggml-cuda" / "ggml"))
    before = tree_hash(copy)
    _append(copy / "src/ggml-cpu/ops.h")
    assert tree_hash(copy) == before == tree_hash(fake_tree)


def test_a_commented_enum_line_is_no_type(fake_tree):
    header = fake_tree / "include/ggml.h"
    header.write_text(header.read_text().replace("GGML_TYPE_COUNT", "// GGML_TYPE_Q8_0 = 99,\n    GGML_TYPE_COUNT"))
    assert locate(fake_tree).type_ids["q8_0"] == 8


def test_a_missing_path(tmp_path):
    assert _error(tmp_path / "nope", "--ggml-b") == f"--ggml-b {tmp_path / 'nope'}: no such directory"


def test_not_a_ggml_tree(tmp_path):
    assert _error(tmp_path) == (f"--ggml {tmp_path}: not a ggml tree (no src/ggml-cuda/mmvq.cu in it or in its "
                                f"ggml/ folder)")


@pytest.mark.parametrize("source", [MMVQ, CONVERT, QUANTIZE])
def test_a_kernel_missing(fake_tree, source):
    kernel = SIGNATURES[source][0]
    path = fake_tree / source
    path.write_text(path.read_text().replace(f"void {kernel}(", f"void {kernel}_renamed("))
    assert _error(fake_tree) == (f"--ggml {fake_tree.resolve()}: {source} has no __global__ kernel {kernel} "
                                 f"(an unsupported ggml version?)")


def test_a_changed_signature_names_the_kernel_and_shows_the_new_list(fake_tree):
    path = fake_tree / QUANTIZE
    path.write_text(path.read_text().replace("const uint3 ne2", "const uint3 ne2,\n        const int64_t ne3"))
    assert _error(fake_tree.parent) == (
        f"--ggml {fake_tree.resolve()}: {QUANTIZE}: quantize_q8_1's parameters changed (an unsupported ggml "
        f"version): (const float * x_ptr, void * vy_ptr, const int64_t ne00, const int64_t s01, const int64_t "
        f"s02, const int64_t s03, const int64_t ne0, const uint32_t ne1, const uint3 ne2, const int64_t ne3)")


def test_spacing_alone_is_no_change(fake_tree):
    path = fake_tree / CONVERT
    path.write_text(path.read_text().replace("const void * __restrict__ vx", "const void *__restrict__   vx"))
    assert locate(fake_tree).formats == FAKE["formats"]


def test_no_version_in_cmakelists(fake_tree):
    path = fake_tree / "CMakeLists.txt"
    path.write_text(path.read_text().replace("set(GGML_VERSION_PATCH 4)\n", ""))
    assert _error(fake_tree) == (f"--ggml {fake_tree.resolve()}: CMakeLists.txt sets no "
                                 f"GGML_VERSION_MAJOR/MINOR/PATCH")


def test_a_tree_without_cmakelists_is_taken_with_its_version_unknown(fake_tree, capsys):
    (fake_tree / "CMakeLists.txt").unlink()
    tree = locate(fake_tree)
    assert tree.version == "unknown" and tree.formats == FAKE["formats"]
    assert capsys.readouterr().err == (f"--ggml {fake_tree.resolve()}: no CMakeLists.txt, so its version is "
                                       "recorded as unknown\n")


def test_a_source_that_is_a_fifo_is_refused_not_read(fake_tree):
    import os

    path = fake_tree / CONVERT
    path.unlink()
    os.mkfifo(path)
    assert _error(fake_tree) == f"--ggml {path.parent}: convert.cu is not a regular file"


# Each number the tree gives, as written in the fake tree, and what an absurd one is refused as.
NUMBERS = {"type id": ("include/ggml.h", "GGML_TYPE_Q8_0 = 8,", "GGML_TYPE_Q8_0 = {n},", "GGML_TYPE_Q8_0", "0..1023"),
           "QR": ("src/ggml-common.h", "#define QR8_0 1\n", "#define QR8_0 {n}\n", "QR8_0", "1..8"),
           "VDR": ("src/ggml-cuda/vecdotq.cuh", "VDR_Q8_0_Q8_1_MMVQ 2\n", "VDR_Q8_0_Q8_1_MMVQ {n}\n",
                   "VDR_Q8_0_Q8_1_MMVQ", "1..64"),
           "version": ("CMakeLists.txt", "GGML_VERSION_MINOR 9)", "GGML_VERSION_MINOR {n})", "GGML_VERSION_MINOR",
                       "0..999999")}


def _write_number(tree, which, literal):
    relative, old, new, name, limits = NUMBERS[which]
    path = tree / relative
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new.format(n=literal)))
    return relative, name, limits


@pytest.mark.parametrize("which", NUMBERS)
@pytest.mark.parametrize("literal,shown", [("9" * 5000, "an integer of 5000 digits"),  # int() raised ValueError
                                           ("1" + "0" * 30, "an integer of 31 digits"), ("1234567", "1234567")])
def test_an_absurd_number_in_the_tree_names_the_file_and_the_value(fake_tree, which, literal, shown):
    relative, name, limits = _write_number(fake_tree, which, literal)
    assert _error(fake_tree) == f"--ggml {fake_tree.resolve()}: {relative}: {name} is {shown}, not in {limits}"


def test_a_qr_of_zero_is_refused_not_divided_by(fake_tree):
    relative, name, limits = _write_number(fake_tree, "QR", "0")
    assert _error(fake_tree, "--ggml-b") == f"--ggml-b {fake_tree.resolve()}: {relative}: {name} is 0, not in 1..8"


def test_an_absurd_number_of_a_type_the_adapter_does_not_use_is_not_read(fake_tree):
    header = fake_tree / "include/ggml.h"
    header.write_text(header.read_text().replace("GGML_TYPE_COUNT = 43", "GGML_TYPE_COUNT = " + "9" * 5000))
    assert locate(fake_tree).type_ids == FAKE["type_ids"]


# --- the real tree of the pinned sdist -------------------------------------------------------------------
REAL_FORMATS = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq2_xxs",
                "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m", "iq4_nl", "iq4_xs")


def test_the_pinned_real_tree(real_tree):
    tree = locate(real_tree)
    assert tree.version == "0.25.3"
    assert tree.formats == REAL_FORMATS and len(REAL_FORMATS) == 19
    assert {f: tree.type_ids[f] for f in ("iq2_xxs", "iq4_xs", "q4_k", "q8_0", "iq1_m")} == {
        "iq2_xxs": 16, "iq4_xs": 23, "q4_k": 12, "q8_0": 8, "iq1_m": 29}
    assert {f: tree.vdr[f] for f in ("iq4_xs", "q2_k", "iq1_s", "q8_0")} == {
        "iq4_xs": 4, "q2_k": 1, "iq1_s": 1, "q8_0": 2}
    assert {f: tree.qr[f] for f in ("q8_0", "q4_k", "iq2_xxs", "iq1_s")} == {
        "q8_0": 1, "q4_k": 2, "iq2_xxs": 4, "iq1_s": 8}
