"""`strata-bench ab`: paired A/B of two commands (or one command with an environment switch), or of
two kernel variants, in ABBA (or AB, random) order, with paired statistics and a verdict."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import click

from strata_bench.cli.options import (SAID, FiniteFloat, list_option, output_option, quiet_option, results_option,
                                      run_options)
from strata_bench.cli.ab_extras import extras_options, write_exports
from strata_bench.ab.plan import ORDERS  # light: the plan module imports neither scipy nor numpy
from strata_bench.cases.request import CaseRequest
from strata_bench.errors import InputError


@click.command("ab", context_settings={"allow_interspersed_args": False})
@run_options("bench")
@list_option
@click.option("--order", type=click.Choice(ORDERS), default="abba", show_default=True,
              help="abba: pair p runs A,B when p is even and B,A when odd; ab: always A,B; "
                   "random: a seeded coin flip per pair.")
@click.option("--pairs", type=click.IntRange(min=1), default=10, show_default=True, help="Measured pairs.")
@click.option("--warmup", type=click.IntRange(min=0), default=1, show_default=True,
              help="Warm-up pairs run first: recorded and reported, left out of the statistics.")
@click.option("--seed", type=int, default=None, help="Seed of --order random (default: drawn and recorded).")
@click.option("--env-a", "env_a", multiple=True, metavar="K=V",
              help="Set K=V for arm A only (repeatable; a bare K unsets K). Nothing else in the environment changes "
                   "but STRATA_AB_TAG, the same in both arms (how the watchdog finds what the run started).")
@click.option("--env-b", "env_b", multiple=True, metavar="K=V", help="Set K=V for arm B only (as --env-a).")
@click.option("--a", "a_spec", metavar="CMD|VARIANT",
              help="Command line of arm A (split like a shell, run without one), or with --family the baseline "
                   "variant.")
@click.option("--b", "b_spec", metavar="CMD|VARIANT",
              help="Command line of arm B, or with --family the variant under test.")
@click.option("--metric", "metrics", multiple=True, type=SAID, metavar="[NAME[:higher][:UNIT]=]REGEX",
              help="Read a figure from stdout+stderr (repeatable): the group (?P<value>...) or the only group; "
                   "a group (?P<key>...) gives one metric per key (NAME[key]); the last match counts. "
                   "NAME:higher= marks that metric higher-is-better, NAME:UNIT= (prefill:ms=, "
                   "decode:higher:tok/s=) the unit it is printed in. Default: wall time of the process.")
@click.option("--metric-json", "metric_json", multiple=True, metavar="llama-bench|[NAME[:higher][:UNIT]=]FIELD[@KEY]",
              help="Read figures from JSON objects in the output (repeatable): FIELD of each object, one metric per "
                   "KEY (llama-bench: its test name, pp512, tg128; or a template, pp{n_prompt}); an array FIELD "
                   "gives its median. 'llama-bench' is avg_ts:higher:t/s=avg_ts@llama-bench, for llama-bench -o "
                   "json; 'llama-bench-median' is median_ts:higher:t/s=samples_ts@llama-bench, the median of "
                   "each test's repetitions.")
@click.option("--same", "same", multiple=True, type=SAID, metavar="[NAME=]REGEX",
              help="Output that must be identical in every run of both arms (repeatable; group value, the only "
                   "group, or the whole match; a key group checks per key). A difference exits 1, and so does an "
                   "entry an arm, key or run never printed (shown as missing).")
@click.option("--allow-missing", is_flag=True,
              help="An --same entry that an arm, key or run never printed is shown as missing but does not fail.")
@click.option("--unit", default=None,
              help="Show time figures in this unit (s, ms, us, ns), converted from their own: wall time is in s, "
                   "a --metric NAME:ms= in ms. A metric without a unit of its own is labelled with it.")
@click.option("--higher-is-better", is_flag=True, help="The metrics are rates (tokens/s): higher is better.")
@click.option("--timeout", type=FiniteFloat(min=0, min_open=True), default=None, metavar="S",
              help="Kill a run (its whole process group) after S seconds; it is recorded as failed.")
@click.option("--shell", is_flag=True, help="Run the command strings through /bin/sh -c.")
@click.option("--fail-on-regression", "fail_pct", type=FiniteFloat(min=0), default=None, metavar="PCT",
              help="Exit 1 when B is worse by more than PCT percent with the 95% CI excluding PCT.")
@click.option("--same-band", "band_pct", type=FiniteFloat(min=0), default=1.0, show_default=True,
              metavar="PCT", help="Verdict SAME (equivalence) when the whole 95% CI of the robust shift of B vs A "
                                  "lies within +/-PCT percent.")
@click.option("--until-decided", "until_decided", type=click.IntRange(min=0), default=0, metavar="MAX_PAIRS",
              help="While any metric is UNDECIDED after --pairs, add pairs (two at a time) up to MAX_PAIRS in all.")
@click.option("--prepare", type=SAID, metavar="CMD", help="Shell command run before each run (the arm's environment).")
@click.option("--conclude", type=SAID, metavar="CMD", help="Shell command run after each run, failed or not.")
@click.option("--setup", type=SAID, metavar="CMD", help="Shell command run once before the first run.")
@click.option("--cleanup", type=SAID, metavar="CMD",
              help="Shell command run once after the last run (also after Ctrl-C, SIGTERM, SIGHUP or a failed "
                   "--setup).")
@click.option("--server", metavar="CMD",
              help="Start CMD (a shell command, the arm's environment) fresh for every run, wait until ready, "
                   "run the arm's command as its client, then stop the server's whole process tree. "
                   "Metrics are read from both outputs.")
@click.option("--ready", type=SAID, metavar="REGEX",
              help="The server is ready when a line of its output matches REGEX.")
@click.option("--ready-port", type=click.IntRange(1, 65535), default=None, metavar="N",
              help="The server is ready when a process of its own tree listens on port N; a port already "
                   "held before the first run is refused (exit 2, naming the holder).")
@click.option("--ready-timeout", type=FiniteFloat(min=0, min_open=True), default=60.0, show_default=True,
              metavar="S", help="A server not ready after S seconds is a failed run (with its last lines).")
@click.option("--param", "params", multiple=True, metavar="NAME=V1,V2",
              help="Repeatable: one case per combination of values, {NAME} substituted in the commands, hooks, "
                   "server and --env-a/--env-b values; the combinations are interleaved pair by pair.")
@click.option("--max-failures", default="25%", show_default=True, metavar="N|P%",
              help="Stop with exit 1 once more runs than this have failed (count, or share of all runs).")
@results_option("Where records (appended per run) and the summary go: DIR/<device>/ab-<stamp>.jsonl/.json. "
                "Default results; for command A/B, $STRATA_RESULTS_DIR where set, else ~/.cache/strata-bench/results "
                "inside a checkout whose results/ git tracks (a user's runs never dirty the tree).",
                default=None)
@output_option(help="Rich table (default), markdown for a pull request, or JSON.")
@quiet_option
@extras_options
@click.argument("command_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- CMD ARGS...]")
def command(spec, list_only, order, pairs, warmup, seed,
            env_a, env_b, a_spec, b_spec, metrics, same, unit, higher_is_better, timeout, shell, fail_pct, band_pct,
            until_decided, prepare, conclude, setup, cleanup, server, ready, ready_port, ready_timeout, params,
            max_failures, allow_missing, metric_json,
            results_dir, output, quiet, extras, command_args):
    """Compare A and B run by run in ABBA order and judge B with paired statistics.

    Whole commands: either one command after `--` whose arms differ only by --env-a/--env-b, or two
    command lines --a 'CMD' --b 'CMD'. Every run is a fresh process (and, with --server, a fresh
    server); the figures are its wall time or each --metric, each with its own verdict; --same
    output must be identical in every run; --param runs every combination of values, interleaved.
    Kernel variants: with --family, --a and --b name variants (--format then filters quant formats)
    and the runs are timed in one process.

    A run that fails (nonzero exit, --timeout, no metric) is recorded and shown; its pair leaves
    the paired statistics. Every run is appended to the records file as it finishes.
    The verdict is SAME, FASTER (B better), SLOWER (B worse) or UNDECIDED, with its reason.

    Exit codes: 0 done; 1 regression (--fail-on-regression), too many failed runs, an arm with no
    successful run, or --same output that differs or is missing; 2 bad usage.

    \b
    Examples:
        strata-bench ab --pairs 20 --env-a STRATA_Q2_WARP=0 --env-b STRATA_Q2_WARP=1 \\
            --metric 'prefill \\d+ tokens in (?P<value>[0-9.]+) ms' --unit ms -- python -m my.workload
        strata-bench ab --pairs 10 --env-a STRATA_OLD_IQ_MMVQ=1 --env-b STRATA_OLD_IQ_MMVQ=0 \\
            --metric 'prefill:ms=prefill (?P<key>\\d+) tokens in (?P<value>[0-9.]+) ms' \\
            --metric 'decode:higher:tok/s=([0-9.]+) tokens/s' --same 'logits=logits sha256 (?P<key>\\d+): (\\w+)' \\
            --param decode=32,128 -- strata-bench workload --tokens 128,512 --decode '{decode}'
        strata-bench ab --pairs 10 --env-b MY_SWITCH=1 --server 'my-server --port 8080' --ready 'listening' \\
            --metric 'tok/s: ([0-9.]+)' -- my-client --port 8080
        strata-bench ab --a 'sleep 0.10' --b 'sleep 0.11' --pairs 10 -o md
        strata-bench ab -n old -n new -P ms 10 30 --step 10 --a 'sleep 0.0{ms}' --b 'sleep 0.0{ms}5' \\
            --export-markdown ab.md --export-csv ab.csv
        strata-bench ab --family mmvq --a old --b new --format iq2_xxs --pairs 20
        strata-bench ab --family mmvq --variants examples/toml_variant/variants.toml --a old --b row8 \\
            --shape 131072x8192 --cols 1,8 --format iq3_s
    """
    # Nothing imported here brings scipy: a usage error returns before the statistics are loaded.
    from strata_bench.ab.matrix import CommandLines, make_combinations, run_matrix
    from strata_bench.ab.metrics import metric_label, parse_output_specs
    from strata_bench.ab.process import AbInterrupted
    from strata_bench.ab.plan import make_plan
    from strata_bench.stats.criteria import Criteria

    criteria = Criteria(higher_is_better=higher_is_better, same_band=band_pct / 100,
                        fail_on_regression=None if fail_pct is None else fail_pct / 100)
    metric_specs = parse_output_specs(metrics, "--metric", "metric")
    if metric_json:
        from strata_bench.ab.json_metrics import parse_json_metrics

        metric_specs += parse_json_metrics(metric_json, [" ".join(command_args), a_spec or "", b_spec or ""],
                                           [m.name for m in metric_specs])
    same_specs = parse_output_specs(same, "--same", "output", need_group=False)
    from strata_bench.ab.llama_args import check_models

    check_models([" ".join(command_args), a_spec, b_spec, server, setup, prepare])
    unit = _display_unit(unit, metric_specs)
    directions = [(m.name, m.higher_is_better) for m in metric_specs if m.higher_is_better is not None]
    plan = make_plan(order, pairs, warmup, seed, max_failures, criteria, unit,
                     metric_label(metrics[0], metric_specs[0]) if len(metrics) == 1 else (
                         metric_specs[0].name if metric_specs else "wall time"),
                     directions, until_decided, allow_missing, [(m.name, m.unit) for m in metric_specs if m.unit],
                     None if metric_specs else "s")
    if not spec.filter.families and (list_only or spec.request != CaseRequest() or spec.extensions):
        raise InputError(f"{_first_kernel_option(list_only, spec)} applies to kernel variants: add --family NAME")
    extras.check()
    if spec.filter.families:
        _reject_command_options(env_a, env_b, metrics or metric_json or same, shell, command_args,
                                prepare or conclude or setup or cleanup or server or params,
                                extras.scans or extras.names or extras.ignore_failure or extras.show_output)
        if list_only:
            _list_cases(spec)
            return
        report = _kernel_ab(spec, a_spec, b_spec, plan, results_dir or "results", quiet)
    else:
        lines = CommandLines(a_spec, b_spec, tuple(command_args), env_a, env_b, shell, prepare, conclude, server,
                             ready, ready_port, ready_timeout, extras.names, extras.ignore_failure,
                             extras.show_output)
        combos = make_combinations(lines, _param_values(params, extras), timeout, metric_specs, same_specs)
        try:
            report = run_matrix(combos, plan, _command_results(results_dir), _provenance, _progress(quiet), setup,
                                cleanup)
        except AbInterrupted as stop:
            why = f"terminated ({signal.Signals(stop.signum).name})" if stop.terminated else "interrupted"
            click.echo(f"{why}: records kept in {stop.records}; summary (interrupted: true) in {stop.summary}",
                       err=True)
            if stop.terminated:
                raise SystemExit(128 + stop.signum) from None  # as a shell reports a death by that signal
            raise
    from strata_bench.report.ab import render_ab

    text = render_ab(report.outcomes, output)
    if text is not None:
        click.echo(text, nl=not text.endswith("\n"))
    if report.summary_path:
        click.echo(f"results: {report.summary_path}", err=True)
    write_exports(extras, report)
    report.raise_for_status()


def _command_results(given: str | None) -> Path:
    """--results as given; without it, results/, unless git tracks that folder here (this project's checkout,
    whose results/ holds committed evidence): then the user's cache, said in one line."""
    from strata_bench.results.paths import untracked_results_root

    if given is not None:
        return Path(given)
    root = untracked_results_root(Path("results"))
    if root != Path("results") and not os.environ.get("STRATA_RESULTS_DIR"):
        click.echo(f"results/ here is tracked by git: this A/B's records go to {root} (--results DIR to choose)",
                   err=True)
    return root


def _param_values(params, extras) -> dict[str, list[str]]:
    """--param values, then each -P scan's (a name given by both is an error)."""
    from strata_bench.ab.matrix import parse_params, scan

    values = parse_params(params)
    for name, low, high in extras.scans:
        if name in values:
            raise InputError(f"-P {name} and --param {name} both give {name!r} values")
        if not name.isidentifier():
            raise InputError(f"-P NAME must be a name like threads, got {name!r}")
        values[name] = scan(name, low, high, extras.step)
    return values


def _display_unit(unit: str | None, metric_specs) -> str:
    """--unit, checked: wall time (no --metric) converts into a time unit only."""
    from strata_bench.ab.plan import SECONDS_PER

    if unit is None:
        return "" if metric_specs else "s"
    if not metric_specs and unit not in SECONDS_PER:
        raise InputError(f"--unit converts wall time (s) into {', '.join(SECONDS_PER)}; got {unit!r}")
    return unit


def _reject_command_options(env_a, env_b, metric, shell, command_args, hooks=None, extras=None) -> None:
    used = [name for name, value in (("--env-a", env_a), ("--env-b", env_b), ("--metric/--same", metric),
                                     ("--shell", shell), ("a command after --", command_args),
                                     ("--prepare/--conclude/--setup/--cleanup/--server/--param", hooks),
                                     ("-P/-n/--ignore-failure/--show-output", extras)) if value]
    if used:
        raise InputError(f"{used[0]} applies to command A/B, not to kernel variants (--family)")


def _first_kernel_option(list_only: bool, spec) -> str:
    """The first option given that only kernel A/B takes, as the command line spells it."""
    words = [*(["--list"] if list_only else []), *spec.request.argv(), *(w for e in spec.extensions for w in e.argv())]
    return next(w for w in words if w.startswith("-"))


def _list_cases(spec) -> None:
    from strata_bench.cli.listing import echo_cases
    from strata_bench.runs.prepare import prepare

    echo_cases(prepare(spec).cases, spec.adds_variants)


def _kernel_ab(spec, variant_a, variant_b, plan, results_dir, quiet):
    """Kernel variants in one process, through strata_bench.ab.kernel (imported only here)."""
    if not (variant_a and variant_b):
        raise InputError("--family needs --a VARIANT and --b VARIANT (for example --a old --b new)")
    try:
        from strata_bench.ab import kernel as kernel_ab
    except ModuleNotFoundError as exc:
        if exc.name != "strata_bench.ab.kernel":
            raise
        raise InputError("kernel A/B is unavailable: strata_bench.ab.kernel is missing from this build") from None
    from strata_bench.cli.gpu_run import compilers_for_gpu_run

    with compilers_for_gpu_run():
        return kernel_ab.run_kernel_ab(spec, variant_a, variant_b, plan, Path(results_dir), progress=_progress(quiet))


def _progress(quiet: bool):
    """The runs' progress display (kept on screen when done: an A/B's runs are worth a look), or None."""
    if quiet:
        return None
    from strata_bench.report.progress import progress_bar

    return lambda label, total: progress_bar(label, total, enabled=True, transient=False)


def _provenance() -> dict:
    from strata_bench.results import provenance

    return provenance.collect(extra={"command": "ab"})
