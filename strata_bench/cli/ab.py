"""`strata-bench ab`: paired A/B of two commands (or one command with an environment switch), or of
two kernel variants, in ABBA (or AB, random) order, with paired statistics and a verdict."""
from __future__ import annotations

from pathlib import Path

import click

from strata_bench.cli.options import (case_filter_options, make_filter, output_option, quiet_option, results_option,
                                      split_output_format)
from strata_bench.ab.plan import ORDERS  # light: the plan module imports neither scipy nor numpy
from strata_bench.errors import InputError


@click.command("ab", context_settings={"allow_interspersed_args": False})
@case_filter_options
@click.option("--order", type=click.Choice(ORDERS), default="abba", show_default=True,
              help="abba: pair p runs A,B when p is even and B,A when odd; ab: always A,B; "
                   "random: a seeded coin flip per pair.")
@click.option("--pairs", type=click.IntRange(min=1), default=10, show_default=True, help="Measured pairs.")
@click.option("--warmup", type=click.IntRange(min=0), default=1, show_default=True,
              help="Warm-up pairs run first: recorded and reported, left out of the statistics.")
@click.option("--seed", type=int, default=None, help="Seed of --order random (default: drawn and recorded).")
@click.option("--env-a", "env_a", multiple=True, metavar="K=V",
              help="Set K=V for arm A only (repeatable; a bare K unsets K). Nothing else in the environment changes.")
@click.option("--env-b", "env_b", multiple=True, metavar="K=V", help="Set K=V for arm B only (as --env-a).")
@click.option("--a", "a_spec", metavar="CMD|VARIANT",
              help="Command line of arm A (split like a shell, run without one), or with --family the baseline "
                   "variant.")
@click.option("--b", "b_spec", metavar="CMD|VARIANT",
              help="Command line of arm B, or with --family the variant under test.")
@click.option("--metric", metavar="REGEX",
              help="Read the figure from stdout+stderr: a regex with the named group (?P<value>...); the last "
                   "match counts. Default: wall time of the process.")
@click.option("--unit", default=None,
              help="Unit of --metric, for display (default: s for wall time, none for a metric).")
@click.option("--higher-is-better", is_flag=True, help="The metric is a rate (tokens/s): higher is better.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None, metavar="S",
              help="Kill a run (its whole process group) after S seconds; it is recorded as failed.")
@click.option("--shell", is_flag=True, help="Run the command strings through /bin/sh -c.")
@click.option("--fail-on-regression", "fail_pct", type=click.FloatRange(min=0), default=None, metavar="PCT",
              help="Exit 1 when B is worse by more than PCT percent with the 95% CI excluding PCT.")
@click.option("--same-band", "band_pct", type=click.FloatRange(min=0), default=1.0, show_default=True,
              metavar="PCT", help="Verdict SAME when the 95% CI of B vs A lies within +/-PCT percent.")
@click.option("--max-failures", default="25%", show_default=True, metavar="N|P%",
              help="Stop with exit 1 once more runs than this have failed (count, or share of all runs).")
@results_option("Where records (appended per run) and the summary go: DIR/<device>/ab-<stamp>.jsonl/.json.")
@output_option(help="Rich table (default), markdown for a pull request, or JSON. --format table|md|json "
                    "means the same (other --format values filter quant formats with --family).")
@quiet_option
@click.argument("command_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- CMD ARGS...]")
def command(families, formats, pattern, kernels_dir, cases_file, order, pairs, warmup, seed, env_a, env_b,
            a_spec, b_spec, metric, unit, higher_is_better, timeout, shell, fail_pct, band_pct, max_failures,
            results_dir, output, quiet, command_args):
    """Compare A and B run by run in ABBA order and judge B with paired statistics.

    Whole commands: either one command after `--` whose arms differ only by --env-a/--env-b, or two
    command lines --a 'CMD' --b 'CMD'. Every run is a fresh process; the figure is its wall time or
    the `value` group of --metric. Kernel variants: with --family, --a and --b name variants
    (--format then filters quant formats) and the runs are timed in one process.

    A run that fails (nonzero exit, --timeout, no metric) is recorded and shown; its pair leaves
    the paired statistics. Every run is appended to the records file as it finishes.
    The verdict is SAME, FASTER (B better), SLOWER (B worse) or UNDECIDED, with its reason.

    Exit codes: 0 done, 1 regression (--fail-on-regression) or too many failed runs, 2 bad usage.

    \b
    Examples:
        strata-bench ab --pairs 20 --env-a STRATA_Q2_WARP=0 --env-b STRATA_Q2_WARP=1 \\
            --metric 'prefill \\d+ tokens in (?P<value>[0-9.]+) ms' --unit ms -- python -m my.workload
        strata-bench ab --a 'sleep 0.10' --b 'sleep 0.11' --pairs 10 --format md
        strata-bench ab --family mmvq --a old --b new --format iq2_xxs --pairs 20
    """
    from strata_bench.ab.command import compile_metric, run_command_ab
    from strata_bench.ab.plan import make_plan
    from strata_bench.report.ab import render_ab
    from strata_bench.stats.criteria import Criteria

    formats, output = split_output_format(formats, output)  # --format md|json means the output format
    criteria = Criteria(higher_is_better=higher_is_better, same_band=band_pct / 100,
                        fail_on_regression=None if fail_pct is None else fail_pct / 100)
    metric_regex = compile_metric(metric)
    unit = unit if unit is not None else ("" if metric_regex else "s")
    plan = make_plan(order, pairs, warmup, seed, max_failures, criteria, unit,
                           metric or "wall time")
    if families:
        _reject_command_options(env_a, env_b, metric, shell, command_args)
        report = _kernel_ab(make_filter(families, formats, pattern), a_spec, b_spec, plan, results_dir,
                            kernels_dir, cases_file, quiet)
    else:
        spec_a, spec_b = _command_specs(a_spec, b_spec, env_a, env_b, shell, metric_regex, timeout, command_args)
        report = run_command_ab(spec_a, spec_b, plan, Path(results_dir), _provenance(), quiet)
    text = render_ab(report.outcomes, output or "table")
    if text is not None:
        click.echo(text, nl=not text.endswith("\n"))
    if report.summary_path:
        click.echo(f"results: {report.summary_path}", err=True)
    report.raise_for_status()


def _command_specs(a_spec, b_spec, env_a, env_b, shell, metric, timeout, command_args):
    """Two CommandSpecs: one command line with per-arm env switches, or two command lines."""
    from strata_bench.ab.command import CommandSpec, command_argv, parse_env

    if command_args and (a_spec or b_spec):
        raise InputError("give either a command after -- (arms differ by --env-a/--env-b) or --a/--b, not both")
    if command_args:
        line = " ".join(command_args) if shell else tuple(command_args)
        lines = (line, line)
    elif a_spec and b_spec:
        lines = (command_argv(a_spec, shell), command_argv(b_spec, shell))
    else:
        raise InputError("nothing to run: give a command after -- or both --a 'CMD' and --b 'CMD' "
                         "(or --family F for kernel variants)")
    envs = (parse_env(env_a), parse_env(env_b))
    return tuple(CommandSpec(line, env, shell, metric, timeout) for line, env in zip(lines, envs))


def _reject_command_options(env_a, env_b, metric, shell, command_args) -> None:
    used = [name for name, value in (("--env-a", env_a), ("--env-b", env_b), ("--metric", metric),
                                     ("--shell", shell), ("a command after --", command_args)) if value]
    if used:
        raise InputError(f"{used[0]} applies to command A/B, not to kernel variants (--family)")


def _kernel_ab(case_filter, variant_a, variant_b, plan, results_dir, kernels_dir, cases_file, quiet):
    """Kernel variants in one process, through strata_bench.ab.kernel (imported only here)."""
    if not (variant_a and variant_b):
        raise InputError("--family needs --a VARIANT and --b VARIANT (for example --a old --b new)")
    try:
        from strata_bench.ab import kernel as kernel_ab
    except ModuleNotFoundError as exc:
        if exc.name != "strata_bench.ab.kernel":
            raise
        raise InputError("kernel A/B is unavailable: strata_bench.ab.kernel is missing from this build") from None
    return kernel_ab.run_kernel_ab(case_filter=case_filter, variant_a=variant_a, variant_b=variant_b, plan=plan,
                                   results_dir=Path(results_dir), kernels_dir=kernels_dir, cases_file=cases_file,
                                   quiet=quiet)


def _provenance() -> dict:
    from strata_bench.results import provenance

    return provenance.collect(extra={"command": "ab"})
