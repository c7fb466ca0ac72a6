"""Compile many families for many architectures: the work behind `strata-bench compile`.

A job is one (family, source, program, arch): build.programs splits a source with many kernels into
several programs. Every job runs even when another fails, so one command shows every broken source and
architecture at once. NVRTC releases the GIL while it compiles, so jobs run on
a small thread pool.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from strata_bench.kernels import build, variant_build
from strata_bench.errors import CompileError, InputError


@dataclass(frozen=True)
class CompileJob:
    family: str
    source: str
    arch: str  # "sm_90"
    name_expressions: tuple[str, ...]
    root: Path | None = None  # kernel directory of a user family (--kernels); None: kernels_src
    options: tuple[str, ...] = ()  # extra NVRTC options of the source (a TOML variant's -I and -D)
    part: str = ""  # "2/7": the source's second program of seven (empty when it is one program)
    build: Any = None  # a TOML variant's SourceBuild (kernels/variant_build.py); None: NVRTC as built-ins

    @property
    def label(self) -> str:
        return f"{self.family}:{shown_path(self.source)}" + (f" [{self.part}]" if self.part else "")


def shown_path(source: str | Path) -> str:
    """A path as messages and results show it: relative to the working directory when inside it (a TOML
    variant's source and a ggml tree are held as absolute paths), else as it is."""
    path = Path(source)
    if not path.is_absolute():
        return str(source)
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(source)


@dataclass(frozen=True)
class CompileOutcome:
    job: CompileJob
    seconds: float
    cache_hit: bool = False
    resources: tuple[build.KernelResources, ...] = ()
    error: str | None = field(default=None, repr=False)  # the NVRTC log of a failed compile
    skipped: str | None = None  # why this host cannot compile it (a missing toolkit header)
    own_source: bool = False  # a failed compile of kernels_src/ (exit 1), not of a user's source (exit 2)

    @property
    def ok(self) -> bool:
        return self.error is None and self.skipped is None


def parse_archs(values: Iterable[str]) -> list[str]:
    """`--arch 75,80 --arch sm_90` -> ["sm_75", "sm_80", "sm_90"] (order kept, duplicates dropped), each
    checked against the loaded NVRTC's supported list before anything compiles."""
    archs = [build.normalize_arch(v) for item in values for v in str(item).split(",") if v.strip()]
    if not archs:
        raise InputError("--arch names no architecture (expected e.g. 75,80,90)")
    return [build.check_arch_supported(a) for a in dict.fromkeys(archs)]


def plan(families: dict[str, Any], archs: Sequence[str]) -> list[CompileJob]:
    """Every (family, source, arch) job, grouped by source so the summary reads row by row."""
    return [job for name, fam in families.items() for src in fam.sources for job in _source_jobs(name, fam, src, archs)]


def _source_jobs(name: str, fam: Any, src: str, archs: Sequence[str]) -> list[CompileJob]:
    """One job per program of the source (build.programs) and architecture, each labelled i/n when split."""
    progs = build.programs(fam, src)
    options = build.family_source_options(fam, src)
    parts = [f"{i + 1}/{len(progs)}" if len(progs) > 1 else "" for i in range(len(progs))]
    spec = variant_build.source_build(fam, src)
    return [CompileJob(name, src, arch, exprs, fam.kernels_root, options, part, spec)
            for exprs, part in zip(progs, parts) for arch in archs]


def run_job(job: CompileJob, use_cache: bool = True) -> CompileOutcome:
    start = time.perf_counter()
    try:
        if job.build is not None:
            compiled = variant_build.compile_build(job.build, job.source, job.name_expressions, job.arch, use_cache)
        else:
            compiled = build.compile_source(job.source, job.name_expressions, job.arch, job.options,
                                            use_cache=use_cache, root=job.root)
    except build.ToolkitHeadersMissing as exc:
        return CompileOutcome(job, time.perf_counter() - start, skipped=str(exc))
    except CompileError as exc:
        return CompileOutcome(job, time.perf_counter() - start, error=str(exc), own_source=exc.own)
    resources = tuple(build.parse_resources(compiled.log, compiled.lowered))
    return CompileOutcome(job, time.perf_counter() - start, compiled.cache_hit, resources)


def run_all(jobs: Sequence[CompileJob], use_cache: bool = True, workers: int = 1,
            on_done: Callable[[CompileOutcome], None] | None = None) -> list[CompileOutcome]:
    """Run every job (in `workers` threads); outcomes come back in job order."""
    def one(job: CompileJob) -> CompileOutcome:
        outcome = run_job(job, use_cache)
        if on_done is not None:
            on_done(outcome)
        return outcome

    if workers <= 1 or len(jobs) <= 1:
        return [one(job) for job in jobs]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, jobs))


def raise_for_failures(outcomes: Sequence[CompileOutcome]) -> None:
    """One CompileError carrying every failed job's NVRTC log (file:line lines included)."""
    failed = [o for o in outcomes if o.error is not None]
    if failed:
        logs = "\n\n".join(o.error or "" for o in failed)
        raise CompileError(f"{len(failed)} of {len(outcomes)} compile(s) failed\n{logs}",
                           own=any(o.own_source for o in failed))
