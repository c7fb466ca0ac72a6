"""bench --profile (issue 37, item 4): after timing, what binds each timed row, read by Nsight Compute.

Each timed row (case, variant) gets one child process: the same bench narrowed to the row's case (the run's
own declared options, cases/spec.RunSpec.narrowed) that runs the check's one call of each variant up to the
row's and times nothing ($STRATA_PROFILE_CALL, timing/bench.checked_only), under `ncu --clock-control none`
(kernels/ncu.py's command: the clocks stay as the bench ran them) asking for every launch of the row's kernels
(-k regex): exactly the kernels one call of the variant launches (grouped's gate/up and down, mmvq's passes).
kernels/ncu.py's parser turns the child's CSV into the row's profile: instructions per weight,
DRAM bytes against the byte model bench's GB/s divides by (flagged beyond 5%), issue-slot and DRAM-throughput
utilisation and the bound (read, issue or latency). Without ncu every row's profile is blank with the reason.

The row's kernel: the base names (what ncu's -k matches: no template arguments) of the kernels the variant
compiles, less those of the variants listed before it in the case (the child runs the case's variants in
order, so their launches would be counted too) and the family-wide ones (the q8_1 quantizer every variant runs).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from strata_bench.cases import Case
from strata_bench.errors import InputError
from strata_bench.kernels import ncu
from strata_bench.kernels.ncu import ProfileRow

CHILD_BUDGET_S = 0.05  # the child times nothing ($STRATA_PROFILE_CALL); a short budget all the same
PROFILE_CALL_ENV = "STRATA_PROFILE_CALL"  # the child's bench: check the variants through this one, time none
CALL_LAUNCHES = 64  # at most this many launches of a call's own kernels profiled (-c): a guard, not a choice
Runner = Callable[..., Any]  # subprocess.run's signature; tests stand in


@dataclass(frozen=True)
class ProfileJob:
    """One row's profiling: the child command, or why the row has none (`blank`)."""

    device: int
    case: str
    variant: str
    command: tuple[str, ...] = ()
    blank: str | None = None
    regex: str = ""  # the row's kernels, as -k matches them


def _base(expression: str) -> str:
    """A kernel name expression's function name as ncu's -k matches it: no template arguments, no namespace."""
    return expression.split("<", 1)[0].split("(", 1)[0].strip().rsplit("::", 1)[-1]


def _bases(family, kernels_of: Callable[[Any, str], Sequence[str]]) -> set[str]:
    return {_base(name) for source in family.sources for name in kernels_of(family, source)}


def kernel_regex(family, case: Case, variant: str) -> str | None:
    """ncu's -k regex for the row's kernel (module docstring), or None where every kernel of the variant is an
    earlier variant's or the family's own."""
    shared = _bases(family, lambda fam, source: fam.family_kernels(source))
    earlier: set[str] = set()
    for name in case.variants:
        mine = _bases(family, family.variant(name).kernels)
        if name == variant:
            own = sorted(mine - earlier - shared)
            return "|".join(own) if own else None
        earlier |= mine
    raise InputError(f"{case.name}: no variant {variant!r} (variants: {', '.join(case.variants)})")


def child_argv(spec, case: Case, device: int, results: str) -> list[str]:
    """The bench run of the case alone, as a fresh process: the run's selecting options narrowed to the case."""
    from strata_bench.cases.spec import RunSpec

    narrowed = (spec or RunSpec(purpose="bench")).narrowed(case, device)
    return [sys.executable, "-m", "strata_bench", "bench", "-q", "--budget", str(CHILD_BUDGET_S),
            "--results", results, *narrowed.argv()]


def plan_jobs(spec, catalog, rows: Sequence[tuple[int, Any]], results: str, ncu_path: str | None) -> list[ProfileJob]:
    """A job for each timed row (device, Timing); rows not timed get none (they have no figures to explain)."""
    jobs = []
    for device, timing in rows:
        if not timing.status.timed:
            continue
        case, variant = timing.case, timing.variant
        if ncu_path is None:
            jobs.append(ProfileJob(device, case.name, variant, blank=ncu.unavailable()))
            continue
        regex = kernel_regex(catalog[case.family], case, variant)
        if regex is None:
            jobs.append(ProfileJob(device, case.name, variant, blank="its kernels are an earlier variant's or the "
                                   "family's: ncu -c 1 would profile theirs"))
            continue
        argv = child_argv(spec, case, device, results)
        command = ncu.ncu_command(argv, regex, ncu_path, count=CALL_LAUNCHES)
        jobs.append(ProfileJob(device, case.name, variant, tuple(command), regex=regex))
    return jobs


def run_job(job: ProfileJob, weights: int, model_bytes: int, runner: Runner = subprocess.run) -> ProfileRow:
    """The row's profile from its child's ncu output, or a blank row saying why there is none."""
    if job.blank is not None:
        return ProfileRow(blank=job.blank, model_bytes=model_bytes)
    proc = runner(list(job.command), capture_output=True, text=True, env={**os.environ, PROFILE_CALL_ENV: job.variant})
    row = merge_output(proc.stdout, proc.stderr, proc.returncode, weights, model_bytes)
    if row.blank == ncu.NO_KERNEL and proc.returncode == 0:
        # The child ran and launched none of the variant's own kernels: its pass here is a kernel an earlier
        # variant also runs (mmvq's new runs mmvq_old's for q8_0 at one column), whose own row profiles it.
        return replace(row, blank=f"none of {job.variant}'s own kernels ({job.regex}) ran in this case: it runs "
                                  "an earlier variant's kernel here, profiled in that variant's row")
    return row


def merge_output(stdout: str, stderr: str, returncode: int, weights: int, model_bytes: int) -> ProfileRow:
    """ncu's CSV (stdout) parsed into the row against its byte model; ncu's complaint, where it made none."""
    blank = ncu.blank_reason(stdout + stderr, returncode)
    if blank is None:
        try:
            return ncu.profile_row(ncu.parse_csv(stdout), weights, model_bytes)
        except InputError as exc:
            blank = str(exc)
    return ProfileRow(blank=blank, model_bytes=model_bytes)


def profile_timings(spec, catalog, rows: list[tuple[int, Any]], runner: Runner = subprocess.run,
                    ncu_path: str | None = None) -> list[tuple[int, Any]]:
    """`rows` (device, Timing) with each timed one's profile set (Timing.profile); the rest as they were.
    `ncu_path`: the profiler (default: kernels/ncu.find_ncu; None there blanks every row)."""
    ncu_path = ncu_path or ncu.find_ncu()
    with tempfile.TemporaryDirectory(prefix="strata-profile-") as results:
        jobs = {(j.device, j.case, j.variant): j for j in plan_jobs(spec, catalog, rows, results, ncu_path)}
        out = []
        for device, timing in rows:
            job = jobs.get((device, timing.case.name, timing.variant))
            if job is not None:
                weights = catalog[timing.case.family].weights_read(timing.case)
                timing = replace(timing, profile=run_job(job, weights, timing.bytes_moved, runner))
            out.append((device, timing))
    return out
