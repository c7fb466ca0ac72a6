"""`strata-bench workload`: a decoder layer stack of the project's kernels, for command A/B."""
from __future__ import annotations

import click

from strata_bench.cli.options import device_option
from strata_bench.errors import InputError


@click.command("workload")
@click.option("--tokens", "tokens_spec", default="512", show_default=True, metavar="N[,N...]",
              help="Prompt tokens to prefill; several sizes comma-separated (one prefill line and logits hash each).")
@click.option("--decode", "decode_tokens", type=click.IntRange(min=1), default=32, show_default=True,
              help="Tokens to decode.")
@click.option("--layers", type=click.IntRange(min=1), default=4, show_default=True, help="Layers in the stack.")
@click.option("--weights", "fmt", default="iq2_xxs", show_default=True,
              help="I-quant format of the projections and expert gate/up weights.")
@device_option(single=True)
def command(tokens_spec, decode_tokens, layers, fmt, device):
    """Run a decoder layer stack (q8_1, mat-vec, grouped experts, combine) and print its speed.

    Prints, per prompt size, `prefill N tokens in X ms` and `logits sha256 N: HEX` (every kernel's
    outputs after the prefill), then `decode M tokens in Y ms: Z tokens/s` and `decode sha256: HEX`
    (of the last prompt size's run). The kernels follow
    STRATA_OLD_IQ_MMVQ=1 (per-column i-quant kernels), STRATA_Q2_WARP=0|1 and STRATA_PF_WMMA2=0|1, so an
    A/B of the switches is one command.

    \b
    Examples:
        strata-bench workload --tokens 128,512 --decode 32
        strata-bench ab --order abba --pairs 10 --env-a STRATA_OLD_IQ_MMVQ=1 --env-b STRATA_OLD_IQ_MMVQ=0 \\
            --metric 'prefill=prefill (?P<key>\\d+) tokens in (?P<value>[0-9.]+) ms' \\
            --same 'logits=logits sha256 (?P<key>\\d+): (?P<value>\\w+)' -- strata-bench workload --tokens 128,512
    """
    from strata_bench.gpu import devices as gpu
    from strata_bench.workloads import decoder as workload

    sizes = parse_sizes(tokens_spec)
    workload.check_format(fmt)  # every input checked before the GPU is sought: bad input is exit 2, not 77
    gpu.require_gpu()
    runs = [workload.run(tokens, decode_tokens, layers, fmt, device) for tokens in sizes]
    click.echo("\n".join(output_lines(runs)))


def parse_sizes(spec: str) -> list[int]:
    """'128,512' -> [128, 512]; InputError names a size that is not a positive whole number."""
    sizes = []
    for part in spec.split(","):
        try:
            size = int(part)
        except ValueError:
            size = 0
        if size < 1:
            raise InputError(f"--tokens must be positive whole numbers, comma-separated; got {part!r} in {spec!r}")
        sizes.append(size)
    return sizes


def output_lines(runs: list[dict]) -> list[str]:
    """What `workload` prints for its runs (one per prompt size): the kernels, a prefill line and a
    logits hash per size, then the last run's decode line and decode hash."""
    last = runs[-1]
    kernels = " ".join(f"{k}={v}" for k, v in last["variants"].items())
    lines = [f"kernels: {kernels}; weights {last['format']}; {last['layers']} layers"]
    lines += [f"prefill {r['tokens']} tokens in {r['prefill_ms']:.3f} ms" for r in runs]
    lines += [f"logits sha256 {r['tokens']}: {r['logits_sha256']}" for r in runs]
    lines.append(f"decode {last['decode_tokens']} tokens in {last['decode_ms']:.3f} ms: "
                 f"{last['decode_tps']:.1f} tokens/s")
    lines.append(f"decode sha256: {last['decode_sha256']}")
    return lines
