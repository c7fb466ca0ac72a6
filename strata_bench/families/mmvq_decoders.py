"""The decoders mmvq_new may use in place of a format's own (kernels_src/common/iq_decode.cuh): each gives
the same Chunk integers, so the same bits (tests/families/test_mmvq_decoders.py checks them on the CPU,
parity on the GPU), with fewer instructions on the n = 1 loops' busiest pipes; mmvq_old always runs the
format's own decode. A launch config names one (NewConfig.decoder); docs/PERF_NOTES.md v5 has the figures."""
from __future__ import annotations

from dataclasses import dataclass

from strata_bench.kit import InputError, traits


@dataclass(frozen=True)
class Decoder:
    """A decoder: its traits expression around the format's traits, and the formats it exists for."""

    name: str
    expression: str  # {traits} is the format's traits struct
    formats: tuple[str, ...]

    def traits(self, fmt: str) -> str:
        if fmt not in self.formats:
            raise InputError(f"decoder {self.name!r} has no {fmt} form; it has: {', '.join(self.formats)}")
        return self.expression.format(traits=traits(fmt))


DECODERS: dict[str, Decoder] = {d.name: d for d in (
    # grid magnitudes and byte masks; the signs through the dp4a chain (sum w q - 2 sum (w & m) q)
    Decoder("masked", "siq::sign_masked<{traits}>", ("iq3_xxs", "iq3_s")),
    # masked, both sums as two chains of half the length each
    Decoder("masked-split", "siq::sign_masked<{traits}, true>", ("iq3_xxs", "iq3_s")),
    # the same decode in fewer integer-ALU instructions (fused LOP3s, PRMT table offsets)
    Decoder("lean", "{traits}_lean", ("iq2_xxs", "iq2_xs")),
)}


def decoder_traits(name: str, fmt: str) -> str:
    """The traits expression a kernel decodes `fmt` with: the format's own (name ""), or a decoder's."""
    if not name:
        return traits(fmt)
    if name not in DECODERS:
        raise InputError(f"unknown decoder {name!r}; decoders: {', '.join(DECODERS)}")
    return DECODERS[name].traits(fmt)
