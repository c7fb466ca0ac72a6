"""`strata-bench workload`: a decoder layer stack of the project's kernels, for command A/B."""
from __future__ import annotations

import click

from strata_bench.cli.options import device_option


@click.command("workload")
@click.option("--tokens", type=int, default=512, show_default=True, help="Prompt tokens to prefill.")
@click.option("--decode", "decode_tokens", type=int, default=32, show_default=True, help="Tokens to decode.")
@click.option("--layers", type=int, default=4, show_default=True, help="Layers in the stack.")
@click.option("--weights", "fmt", default="iq2_xxs", show_default=True,
              help="I-quant format of the projections and expert gate/up weights.")
@device_option(single=True)
def command(tokens, decode_tokens, layers, fmt, device):
    """Run a decoder layer stack (q8_1, mat-vec, grouped experts, combine) and print its speed.

    Prints `prefill N tokens in X ms` and `decode M tokens in Y ms: Z tokens/s`. The kernels follow
    STRATA_OLD_IQ_MMVQ=1 (per-column i-quant kernels), STRATA_Q2_WARP=0|1 and STRATA_PF_WMMA2=0|1, so an
    A/B of the switches is one command.

    \b
    Examples:
        strata-bench workload --tokens 512 --decode 32
        strata-bench ab --order abba --pairs 10 --env-a STRATA_OLD_IQ_MMVQ=1 --env-b STRATA_OLD_IQ_MMVQ=0 \\
            --metric 'prefill \\d+ tokens in (?P<value>[0-9.]+) ms' -- strata-bench workload
    """
    from strata_bench.runner import devices as gpu
    from strata_bench.workloads import decoder as workload

    gpu.require_gpu()
    out = workload.run(tokens, decode_tokens, layers, fmt, device)
    kernels = " ".join(f"{k}={v}" for k, v in out["variants"].items())
    click.echo(f"kernels: {kernels}; weights {fmt}; {layers} layers")
    click.echo(f"prefill {tokens} tokens in {out['prefill_ms']:.3f} ms")
    click.echo(f"decode {decode_tokens} tokens in {out['decode_ms']:.3f} ms: {out['decode_tps']:.1f} tokens/s")
