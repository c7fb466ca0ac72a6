"""experiments/mmvq_tune: the candidate tables (every shape for its pass width, each decoder only for its
formats, the spilling kernels left out), and the decoders it adds to the built-in ones, checked on the CPU
as tests/families/test_mmvq_decoders.py checks those (tests/iq_host/decoder_checks.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from strata_bench import kit
from strata_bench.families import load_builtin_families
from strata_bench.errors import InputError
from tests.cases_file import load_cases_file

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))
from iq_host import decoder_checks  # noqa: E402

TUNE = load_cases_file("experiments/mmvq_tune/cases.py")
MMVQ = load_builtin_families()["mmvq"]
# The decoders this experiment adds (the built-in ones are tested with the family).
OWN = {name: d for name, d in TUNE.DECODERS.items() if name not in MMVQ.DECODERS}
PAIRS = [(fmt, name) for name, d in OWN.items() for fmt in d.formats]


def test_the_experiment_adds_the_six_decoders_new_does_not_run():
    assert sorted(OWN) == ["masked", "masked-rep32", "masked-rep8", "masked-split", "masked-split-rep32",
                           "masked-split-rep8"]
    assert set(TUNE.DECODERS) == set(OWN) | set(MMVQ.DECODERS)


def test_decoders_name_their_traits_copies_and_formats():
    d = TUNE.DECODERS
    assert d["masked"].traits("iq3_xxs") == "siq::sign_masked<siq::fmt_iq3_xxs>"
    assert d["masked-split"].traits("iq3_s") == "siq::sign_masked<siq::fmt_iq3_s, true>"
    assert d["masked-split-rep32"].traits("iq3_xxs") == "siq::sign_masked_rep<siq::fmt_iq3_xxs, true, 32>"
    assert d["masked-rep8"].copies == 8 and d["masked-split-rep32"].copies == 32
    with pytest.raises(InputError, match="decoder 'masked' has no iq2_xxs form; it has: iq3_xxs, iq3_s"):
        d["masked"].traits("iq2_xxs")
    with pytest.raises(InputError, match="decoder 'masked-rep32' has no iq3_s form"):
        d["masked-rep32"].traits("iq3_s")  # 512 words x 32 exceed 48 KiB of static shared memory


def test_every_decoders_table_fits_static_shared_memory():
    from strata_bench.families.mmvq_decoders import decoder_table_bytes

    assert decoder_table_bytes(TUNE.DECODERS["masked-split-rep32"], "iq3_xxs") == 4 * (256 * 32 + 2)
    assert all(decoder_table_bytes(d, f) <= 48 * 1024 for d in TUNE.DECODERS.values() for f in d.formats)


def test_tune_candidates_are_every_shape_for_their_pass_width():
    family = TUNE.TUNE_FAMILIES[0]
    assert [v.name for v in family.variants][:4] == ["old", "new", "r4m3u4", "r4m3u4f"]
    assert len(family.variants) == 2 + len(TUNE.ONE_COLUMN)
    kernels = family.variants[2].kernels(family(), "mmvq/mmvq.cu")
    assert kernels == [f"mmvq_new<siq::fmt_{f}, 1, 4, 3, 4>" for f in kit.KERNEL_FORMATS]
    assert [f.name for f in TUNE.TUNE_FAMILIES] == ["mmvq_tune1", "mmvq_tune2", "mmvq_tune4", "mmvq_tune8",
                                                    "mmvq_tune_decoders1", "mmvq_tune_rep1", "mmvq_tune_rep8"]


def test_decoder_candidates_launch_each_decoder_only_for_its_formats():
    family = next(f for f in TUNE.TUNE_FAMILIES if f.name == "mmvq_tune_decoders1")
    variants = {v.name: v for v in family.variants}
    assert variants["r2m4u8-lean"].kernels(family(), "mmvq/mmvq.cu") == [
        "mmvq_new<siq::fmt_iq2_xxs_lean, 1, 2, 4, 8>", "mmvq_new<siq::fmt_iq2_xs_lean, 1, 2, 4, 8>"]
    assert variants["r4m3u4-masked-split"].kernels(family(), "mmvq/mmvq.cu") == [
        "mmvq_new<siq::sign_masked<siq::fmt_iq3_xxs, true>, 1, 4, 3, 4>",
        "mmvq_new<siq::sign_masked<siq::fmt_iq3_s, true>, 1, 4, 3, 4>"]
    assert [c.fmt for c in family().bench_cases()] == ["iq3_xxs", "iq3_s", "iq2_xxs", "iq2_xs"]


def test_rep_candidates_pair_each_shape_with_every_copy_count_and_skip_the_spilling_kernels():
    one = next(f for f in TUNE.TUNE_FAMILIES if f.name == "mmvq_tune_rep1")
    variants = {v.name: v for v in one.variants}
    assert variants["r4m3u4-masked-split-rep32"].kernels(one(), "mmvq/mmvq.cu") == [
        "mmvq_new<siq::sign_masked_rep<siq::fmt_iq3_xxs, true, 32>, 1, 4, 3, 4>"]
    assert variants["r4m3u2-masked-rep16"].kernels(one(), "mmvq/mmvq.cu") == [
        "mmvq_new<siq::sign_masked_rep<siq::fmt_iq3_xxs, false, 16>, 1, 4, 3, 2>",
        "mmvq_new<siq::sign_masked_rep<siq::fmt_iq3_s, false, 16>, 1, 4, 3, 2>"]
    assert "r4m3u4-masked-split-rep16" in variants and "r4m3u4-masked" in variants
    assert variants["r4m3u4-masked-split-rep16"].kernels(one(), "mmvq/mmvq.cu") == [
        "mmvq_new<siq::sign_masked_rep<siq::fmt_iq3_xxs, true, 16>, 1, 4, 3, 4>"]  # iq3_s's spills
    assert [c.fmt for c in one().bench_cases()] == ["iq3_xxs", "iq3_s"]
    eight = next(f for f in TUNE.TUNE_FAMILIES if f.name == "mmvq_tune_rep8")
    assert {c.ncols for c in eight().bench_cases()} == {8}
    assert "r2m2u0-masked-rep32" in {v.name for v in eight.variants}


def test_a_candidate_launches_its_config_for_its_width_and_the_table_elsewhere(monkeypatch):
    """Quantize, then per pass: the candidate's kernel for its own width, new_config's for the others;
    never the tensor-core pass (a candidate times its own config)."""
    import numpy as np

    from strata_bench.families import mmvq as family_mod
    from strata_bench.families import mmvq_mma
    from tests.stub_kernels import RecordingKernels, stub_launch_helpers

    stub_launch_helpers(monkeypatch, family_mod, mmvq_mma)
    family = TUNE.TUNE_FAMILIES[3]()  # mmvq_tune8
    kernels = RecordingKernels()
    case = family.case("iq4_nl", 32768, 1024, 11, "seed:1")
    dev = {"w": np.zeros(16, np.uint8), "x": np.zeros((11, 1024), np.float32), "xq": np.zeros((11, 32 * 36), np.uint8)}
    family.launch(case, "r2m2u2", kernels, dev, {"y": np.zeros((11, 32768), np.float32)})
    assert kernels.names == ["quantize_q8_1", "mmvq_new<siq::fmt_iq4_nl, 8, 2, 2, 2>",
                             MMVQ.new_config("iq4_nl", 2).kernel("iq4_nl", 2),
                             MMVQ.new_config("iq4_nl", 1).kernel("iq4_nl", 1)]


# --- the added decoders on the CPU: the same chunks and outputs as the format's own decode ----------------------
@pytest.mark.parametrize("fmt,decoder", PAIRS)
@pytest.mark.parametrize("codes", decoder_checks.CODES)
def test_decoder_gives_the_formats_chunks(fmt, decoder, codes):
    decoder_checks.assert_same_chunks(fmt, decoder, codes)


@pytest.mark.parametrize("fmt,decoder", PAIRS)
@pytest.mark.parametrize("data", ["seed:7", "edge:2"])
def test_decoder_gives_the_formats_outputs_bit_for_bit(fmt, decoder, data):
    decoder_checks.assert_same_outputs(MMVQ, fmt, decoder, data)
