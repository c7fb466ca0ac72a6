"""The decoders mmvq_new may use in place of a format's own (kernels_src/common/iq_decode.cuh): each gives
the same Chunk integers, so the same bits (tests/families/test_mmvq_decoders.py checks them on the CPU,
parity on the GPU), with fewer instructions on the n = 1 loops' busiest pipes; mmvq_old always runs the
format's own decode. A launch config names one (NewConfig.decoder); docs/PERF_NOTES.md v5 has the figures."""
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


REP_COPIES = (8, 16, 32)  # the table copies of the replicated decoders

DECODERS: dict[str, Decoder] = {d.name: d for d in (
    # grid magnitudes and byte masks; the signs through the dp4a chain (sum w q - 2 sum (w & m) q)
    Decoder("masked", "siq::sign_masked<{traits}>", ("iq3_xxs", "iq3_s")),
    # masked, both sums as two chains of half the length each
    Decoder("masked-split", "siq::sign_masked<{traits}, true>", ("iq3_xxs", "iq3_s")),
    # the same decode in fewer integer-ALU instructions (fused LOP3s, PRMT table offsets)
    Decoder("lean", "{traits}_lean", ("iq2_xxs", "iq2_xs")),
    # masked and masked-split reading N interleaved table copies, lane l copy l % N: bank conflicts at most
    # 32 / N-way. iq3_s has no 32-copy form: its 512 words x 32 (64 KiB) exceed the 48 KiB of static
    # shared memory a kernel may declare.
    *(Decoder(f"{base}-rep{n}", f"siq::sign_masked_rep<{{traits}}, {split}, {n}>",
              ("iq3_xxs", "iq3_s") if n < 32 else ("iq3_xxs",), n)
      for base, split in (("masked", "false"), ("masked-split", "true")) for n in REP_COPIES),
)}


def decoder_traits(name: str, fmt: str) -> str:
    """The traits expression a kernel decodes `fmt` with: the format's own (name ""), or a decoder's."""
    if not name:
        return traits(fmt)
    if name not in DECODERS:
        raise InputError(f"unknown decoder {name!r}; decoders: {', '.join(DECODERS)}")
    return DECODERS[name].traits(fmt)


def decoder_table_bytes(name: str, fmt: str) -> int:
    """The static shared memory of a new kernel that decodes `fmt` with decoder `name` (SharedTab<F>):
    the table in the decoder's copies, and the two constants."""
    copies = DECODERS[name].copies if name else 1
    return 4 * (TABLE_WORDS[fmt] * copies + 2)
