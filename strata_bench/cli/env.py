"""`strata-bench env`: devices, clocks, power limit, driver, CUDA, CuPy, NVRTC and package versions."""
from __future__ import annotations

import click

from strata_bench.cli.options import output_option


@click.command("env")
@output_option(("table", "json"), "How to print the result.")
def command(output: str) -> None:
    """Show the GPU(s) and software this host would record in results.

    Prints each device's compute capability, SMs, L2, memory clock and bus width, NVML clocks, power
    limit and temperature where NVML is available, and the driver, CUDA runtime, NVRTC, CuPy, gguf and
    package versions. On a host with no usable GPU it prints what it can and exits 77.

    \b
    Example:
        strata-bench env
        strata-bench env -o json > env.json
    """
    from strata_bench.cli.console import stdout_console

    from strata_bench.report import env as envinfo
    from strata_bench.gpu.devices import require_gpu

    prov = envinfo.collect()
    if output == "json":
        click.echo(envinfo.render_json(prov))
    else:
        envinfo.render_table(prov, stdout_console())
    if not prov["devices"]:
        require_gpu()  # raises NoGpu: the CLI prints "skipped: no usable CUDA GPU (<reason>)", exit 77
