"""The decoders mmvq_new may use in place of a format's own (kernels_src/common/decoders.cuh): each gives
the same Chunk integers, so the same bits (tests/families/test_mmvq_decoders.py checks them on the CPU,
parity on the GPU), with fewer instructions on the n = 1 loops' busiest pipes; mmvq_old always runs the
format's own decode. A launch config names one (NewConfig.decoder); docs/PERF_NOTES.md v5 and v7 have the
figures. DECODERS holds the ones NEW_CONFIGS runs; the other candidates the sweeps measured (the plain-table
masked decoders, 8 and 32 table copies) are experiments/mmvq_tune's, which passes its own `Decoder`s.
"""
from __future__ import annotations

from dataclasses import dataclass

from strata_bench.kernels.constants import TABLE_WORDS
from strata_bench.kit import InputError, traits


@dataclass(frozen=True)
class Decoder:
    """A decoder: its traits expression around the format's traits, and the formats it exists for."""

    name: str
    expression: str  # {traits} is the format's traits struct
    formats: tuple[str, ...]
    copies: int = 1  # interleaved copies of the table it stages in shared memory (TableRep in decoders.cuh)

    def traits(self, fmt: str) -> str:
        if fmt not in self.formats:
            raise InputError(f"decoder {self.name!r} has no {fmt} form; it has: {', '.join(self.formats)}")
        return self.expression.format(traits=traits(fmt))


# The decoders NEW_CONFIGS (families/mmvq.py) runs: iq2_xxs and iq2_xs lean at one column (v5), the iq3 ones
# sign-masked with 16 interleaved table copies (v7).
DECODERS: dict[str, Decoder] = {d.name: d for d in (
    # the same decode in fewer integer-ALU instructions (fused LOP3s, PRMT table offsets)
    Decoder("lean", "{traits}_lean", ("iq2_xxs", "iq2_xs")),
    # grid magnitudes and byte masks, the signs through the dp4a chain (sum w q - 2 sum (w & m) q), reading
    # 16 interleaved table copies, lane l copy l % 16: bank conflicts at most 2-way; split: both sums as two
    # chains of half the length each
    Decoder("masked-rep16", "siq::sign_masked_rep<{traits}, false, 16>", ("iq3_xxs", "iq3_s"), 16),
    Decoder("masked-split-rep16", "siq::sign_masked_rep<{traits}, true, 16>", ("iq3_xxs", "iq3_s"), 16),
)}


def decoder_of(decoder: "str | Decoder") -> Decoder | None:
    """The Decoder a launch config names: None for the format's own (""), a Decoder as it is (an
    experiment's own), a name looked up in DECODERS."""
    if not decoder:
        return None
    if isinstance(decoder, Decoder):
        return decoder
    if decoder not in DECODERS:
        raise InputError(f"unknown decoder {decoder!r}; decoders: {', '.join(DECODERS)}")
    return DECODERS[decoder]


def decoder_traits(decoder: "str | Decoder", fmt: str) -> str:
    """The traits expression a kernel decodes `fmt` with: the format's own (decoder ""), or a decoder's
    (a name in DECODERS, or a Decoder)."""
    found = decoder_of(decoder)
    return traits(fmt) if found is None else found.traits(fmt)


def decoder_table_bytes(decoder: "str | Decoder", fmt: str) -> int:
    """The static shared memory of a new kernel that decodes `fmt` with `decoder` (SharedTab<F>): the table
    in the decoder's copies, and the two constants."""
    found = decoder_of(decoder)
    copies = found.copies if found is not None else 1
    return 4 * (TABLE_WORDS[fmt] * copies + 2)
