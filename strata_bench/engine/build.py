"""Running a BuildPlan: the tree copied into the slot's workspace, CMake configure and build of the
targets only, the executables and libraries copied out to the cache entry, a record of it all.

A failed build raises BuildFailed with the compiler's first error line (nvcc's `file(line): error`,
GCC/Clang's `file:line:col: error:`, CMake's `CMake Error at file:line`) and the log's path; nothing
enters the cache. A build already in the cache returns its record without running anything.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator

from strata_bench.engine.plan import BuildPlan
from strata_bench.errors import InputError, StrataError

# progress(done, total, line): a step of the build finished (total 0 while unknown)
Progress = Callable[[int, int, str], None]
_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\] ")
_MAKE_STEP = re.compile(r"^\[\s*(\d+)%\] ")
_ERRORS = (
    re.compile(r"^(?P<file>[^\s:()][^:()]*)\((?P<line>\d+)\): (?:catastrophic )?error\b"),  # nvcc
    re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:\d+:)? (?:fatal )?error\b"),  # GCC, Clang, ld scripts
    re.compile(r"^CMake Error at (?P<file>[^:]+):(?P<line>\d+)"),
)
_ANY_ERROR = re.compile(r"\berror\b", re.IGNORECASE)
LOG_NAME = "build.log"


class BuildFailed(StrataError):
    """The engine's configure or build step failed (exit 1); the message is the first error with its file."""

    exit_code = 1


@dataclass(frozen=True)
class FirstError:
    """The first error line of a build log, with the file (and line) it names where it names one."""

    text: str
    file: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class BuildRecord:
    """One build (or cache hit): what was built and how long each step took."""

    key: str
    tree: str
    arch: str
    targets: tuple[str, ...]
    bin: str
    cached: bool
    configure_s: float = 0.0
    build_s: float = 0.0
    steps: int = 0  # build steps run (ninja's count): a one-file change runs a few, a fresh build hundreds
    files_copied: int = 0  # tree files rewritten in the workspace (all of them the first time)
    tools: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict:
        return {**asdict(self), "targets": list(self.targets), "tools": dict(self.tools)}


def first_error(lines: list[str]) -> FirstError | None:
    """The first compiler error in a build log (a file-naming error first, else any error line)."""
    for i, line in enumerate(lines):
        for pattern in _ERRORS:
            m = pattern.match(line.strip())
            if m:
                text = line.strip()
                if text.startswith("CMake Error") and i + 1 < len(lines) and lines[i + 1].strip():
                    text += " " + lines[i + 1].strip()  # CMake puts the message on the next line
                return FirstError(text, m.group("file"), int(m.group("line")))
    for line in lines:
        if _ANY_ERROR.search(line) and not line.startswith("-- "):
            return FirstError(line.strip())
    return None


def load_record(plan: BuildPlan) -> BuildRecord:
    body = json.loads((plan.entry / "build.json").read_text())
    body["targets"] = tuple(body["targets"])
    body["tools"] = tuple(body.get("tools", {}).items())
    return BuildRecord(**{**body, "cached": True})


def run_build(plan: BuildPlan, progress: Progress | None = None, digests: dict[str, str] | None = None) -> BuildRecord:
    """Build `plan` (or return the cached record); BuildFailed with the first error on failure."""
    if plan.cached:
        return load_record(plan)
    from strata_bench.engine.tree import file_digests
    from strata_bench.engine.workspace import locked, sync_tree

    digests = file_digests(plan.tree) if digests is None else digests
    with locked(plan.slot):
        copied = sync_tree(plan.tree, plan.slot / "src", digests)
        log = plan.slot / LOG_NAME
        with open(log, "w", encoding="utf-8") as out:
            started = time.perf_counter()
            _step(plan.configure_argv(), out, log, "configure", None)
            configured = time.perf_counter()
            steps = _step(plan.build_argv(), out, log, "build", progress)
            built = time.perf_counter()
        record = BuildRecord(plan.key, str(plan.tree), plan.arch, plan.targets, str(plan.bin_dir), False,
                             round(configured - started, 3), round(built - configured, 3), steps, copied,
                             plan.tools.versions)
        _install(plan, record)
    return record


def _step(argv: list[str], out, log: Path, what: str, progress: Progress | None) -> int:
    """Run one CMake step, its output to the log (and progress); BuildFailed when it fails."""
    out.write(f"$ {' '.join(argv)}\n")
    out.flush()
    lines: list[str] = []
    steps = 0
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                                env={**os.environ, "CLICOLOR_FORCE": "0", "NINJA_STATUS": "[%f/%t] "})
    except OSError as exc:
        raise InputError(f"cannot run {argv[0]}: {exc}") from None
    assert proc.stdout is not None
    for line in _lines(proc.stdout):
        out.write(line)
        lines.append(line.rstrip("\n"))
        steps = _progress(line, steps, progress)
    code = proc.wait()
    out.flush()
    if code != 0:
        error = first_error(lines)
        where = error.text if error else f"{what} exited with code {code} and printed no error line"
        raise BuildFailed(f"engine {what} failed: {where} (log: {log})")
    return steps


def _lines(stream) -> Iterator[str]:
    yield from iter(stream.readline, "")


def _progress(line: str, steps: int, progress: Progress | None) -> int:
    ninja = _NINJA_STEP.match(line)
    make = _MAKE_STEP.match(line)
    if ninja:
        done, total = int(ninja.group(1)), int(ninja.group(2))
        steps = max(steps, total)
    elif make:
        done, total = int(make.group(1)), 100
        steps += 1
    else:
        return steps
    if progress is not None:
        progress(done, total, line.strip())
    return steps


def _install(plan: BuildPlan, record: BuildRecord) -> None:
    """Copy the targets and every shared library beside them to <key>/bin, then write build.json (last:
    an entry without it is not a finished build)."""
    built = plan.slot / "build" / "bin"
    staging = plan.entry / "bin.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for target in plan.targets:
        found = built / target
        if not found.is_file():
            raise BuildFailed(f"engine build finished without {target} in {built} (log: {plan.slot / LOG_NAME})")
        shutil.copy2(found, staging / target)
    for lib in sorted(built.iterdir()):
        if ".so" in lib.name:
            shutil.copy2(lib, staging / lib.name, follow_symlinks=False)
    shutil.rmtree(plan.bin_dir, ignore_errors=True)
    staging.rename(plan.bin_dir)
    (plan.entry / "build.json").write_text(json.dumps(record.to_json(), indent=1) + "\n")

