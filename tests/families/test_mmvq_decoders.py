"""strata_bench/families/mmvq_decoders.py and the decoders it names (kernels_src/common/decoders.cuh), run
on the CPU (tests/iq_host): each must give its format's own Chunk (words, scales, dw) and the same isum
and isum_f on every code word, and the warps' outputs bit for bit; the registry must name them right.
The candidates `new` does not run are experiments/mmvq_tune's, tested there the same way."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from strata_bench.families import load_builtin_families
from strata_bench.errors import InputError
from strata_bench.families.mmvq import NEW_CONFIGS, NewConfig
from strata_bench.families.mmvq_decoders import DECODERS, Decoder, decoder_table_bytes, decoder_traits

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from iq_host import decoder_checks

MMVQ = load_builtin_families()["mmvq"]
PAIRS = [(fmt, name) for name, d in DECODERS.items() for fmt in d.formats]


# --- the registry and the launch configs that name a decoder ---------------------------------------------------
def test_decoders_name_their_traits_and_refuse_other_formats():
    assert decoder_traits("", "iq2_xxs") == "siq::fmt_iq2_xxs"
    assert decoder_traits("masked-rep16", "iq3_xxs") == "siq::sign_masked_rep<siq::fmt_iq3_xxs, false, 16>"
    assert decoder_traits("lean", "iq2_xs") == "siq::fmt_iq2_xs_lean"
    with pytest.raises(InputError, match="decoder 'masked-rep16' has no iq2_xxs form; it has: iq3_xxs, iq3_s"):
        decoder_traits("masked-rep16", "iq2_xxs")
    with pytest.raises(InputError, match="unknown decoder 'fast'; decoders: lean, masked-rep16, masked-split-rep16"):
        decoder_traits("fast", "iq3_s")


def test_the_table_holds_exactly_the_decoders_new_runs():
    assert {c.decoder for c in NEW_CONFIGS.values() if c.decoder} == set(DECODERS)


def test_new_config_with_a_decoder_names_it_in_the_kernel_and_the_label():
    config = NewConfig(4, 3, 4, decoder="masked-split-rep16")
    assert config.kernel("iq3_xxs", 1) == "mmvq_new<siq::sign_masked_rep<siq::fmt_iq3_xxs, true, 16>, 1, 4, 3, 4>"
    assert config.label == "r4m3u4-masked-split-rep16" and NewConfig(2, 4, 8, True, decoder="lean").label == "r2m4u8f-lean"
    assert NewConfig(2, 4, 8, decoder="lean").kernel("iq2_xxs", 1) == "mmvq_new<siq::fmt_iq2_xxs_lean, 1, 2, 4, 8>"


def test_a_launch_config_takes_a_decoder_of_its_own():
    """An experiment passes a Decoder that the table lacks: it names the kernel, the label and the table's copies."""
    own = Decoder("masked", "siq::sign_masked<{traits}>", ("iq3_xxs", "iq3_s"))
    config = NewConfig(4, 3, 4, decoder=own)
    assert config.kernel("iq3_s", 1) == "mmvq_new<siq::sign_masked<siq::fmt_iq3_s>, 1, 4, 3, 4>"
    assert config.label == "r4m3u4-masked"
    assert decoder_table_bytes(own, "iq3_xxs") == 4 * (256 + 2)
    assert decoder_table_bytes(Decoder("x", "{traits}", ("iq3_xxs",), 32), "iq3_xxs") == 4 * (256 * 32 + 2)


# --- the decoders on the CPU: the same chunks and outputs as the format's own decode (iq_host/decoder_checks.py) ---
def test_the_iq3_blocks_carry_every_sign_field():
    # So every mask the sign-mask formulas can make is met by the chunk tests below.
    assert len(decoder_checks._sign_fields("iq3_xxs", decoder_checks._blocks("iq3_xxs"))) == 128
    assert len(decoder_checks._sign_fields("iq3_s", decoder_checks._blocks("iq3_s"))) == 256


@pytest.mark.parametrize("fmt,decoder", PAIRS)
@pytest.mark.parametrize("codes", decoder_checks.CODES)
def test_decoder_gives_the_formats_chunks(fmt, decoder, codes):
    decoder_checks.assert_same_chunks(fmt, decoder, codes)


@pytest.mark.parametrize("fmt,decoder", PAIRS)
@pytest.mark.parametrize("data", ["seed:7", "edge:2"])
def test_decoder_gives_the_formats_outputs_bit_for_bit(fmt, decoder, data):
    decoder_checks.assert_same_outputs(MMVQ, fmt, decoder, data)


def test_replicated_decoders_name_their_copies_and_size_their_static_table():
    assert decoder_traits("masked-rep16", "iq3_s") == "siq::sign_masked_rep<siq::fmt_iq3_s, false, 16>"
    assert decoder_traits("masked-split-rep16", "iq3_xxs") == "siq::sign_masked_rep<siq::fmt_iq3_xxs, true, 16>"
    assert decoder_table_bytes("", "iq3_s") == 4 * (512 + 2)
    assert decoder_table_bytes("masked-rep16", "iq3_s") == 4 * (512 * 16 + 2)
    assert all(decoder_table_bytes(n, f) <= 48 * 1024 for n, d in DECODERS.items() for f in d.formats)
