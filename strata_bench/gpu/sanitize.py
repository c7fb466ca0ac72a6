"""`parity --sanitize`: the selected cases under NVIDIA compute-sanitizer, once per tool, and its report
read back as one finding per (tool, case, kernel, error).

The parity command starts itself again as a child under `compute-sanitizer --tool T`. The child is told
so by STRATA_SANITIZE_CHILD=T (set by `child_env`): its case loop (gpu/loop.py) turns CuPy's memory
pool off, so that every array is an allocation of its own (memcheck then sees a read past an array's end,
and initcheck a read of memory nobody wrote, instead of the pool's earlier contents), and prints a marker
line `strata-case: NAME @DEVICE` before each case and `strata-cases: done` after the last. The child's
stdout and stderr and the sanitizer's report (on its stdout) are one stream, so every report follows the
marker of the case that launched its kernel: the sanitizer reports a kernel's errors before the launch
returns to the child (seen on the H200 host, compute-sanitizer 2025.3.1).

The report's format, as that compute-sanitizer prints it with `--show-backtrace device`:

    ========= COMPUTE-SANITIZER
    ========= Invalid __global__ read of size 4 bytes
    =========     at void tmpl_oob<siq::fmt_q8, (int)2>(const float *, float *, int)+0xc0
    =========     by thread (226,0,0) in block (3,0,0)
    =========     Access to 0x7f2f42800fa0 is out of bounds
    =========         Device Frame: via_fn+0xb0             (when the access is in a non-inlined function)
    =========
    ========= Error: Race reported between Write access at shared_race+0xa0
    =========     and Read access at shared_race+0xb0 [256 hazards]
    ========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API
    call to cudaDeviceSynchronize.                                 (one line)
    ========= ERROR SUMMARY: 3000 errors
    ========= ERROR SUMMARY: 2900 errors were not printed. Use --print-limit option to adjust the number of
    printed errors                                                  (one line)
    ========= RACECHECK SUMMARY: 3 hazards displayed (3 errors, 0 warnings)
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from strata_bench.errors import InputError, NoGpu, ToolMissing

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
SANITIZER = "compute-sanitizer"
CUDA_DEFAULT = Path("/usr/local/cuda")  # where a CUDA toolkit installs when $CUDA_PATH is not set
CHILD_ENV = "STRATA_SANITIZE_CHILD"  # the tool a parity child runs under; unset in any other process
CASE_MARKER = "strata-case: "
VARIANT_MARKER = "strata-variant: "  # before each launch of a case (gpu/sanitize_child.py)
END_MARKER = "strata-cases: done"
# compute-sanitizer's own exit code when it found errors: none of parity's (0, 1, 2, 77).
ERROR_EXITCODE = 86
# The report stops after this many errors (the whole run's, not a case's): a kernel that reads a large
# unwritten buffer makes one error per thread, and the text of millions is more than a run can read.
# Errors past it are counted in the summary only; the tool's summary line then says so.
PRINT_LIMIT = 10000
# Every tool: keep the device frames (the kernel of an access in a non-inlined function), drop the host
# ones; a precise error ends the kernel, not the context, so the cases after it still run; the
# reference workers (no CUDA) are not tracked; the child's own exit code comes back when it ends before
# touching CUDA (a usage error, no GPU).
COMMON_FLAGS = ("--show-backtrace", "device", "--destroy-on-device-error", "kernel",
                "--target-processes", "application-only", "--require-cuda-init", "no")
TOOL_FLAGS: Mapping[str, tuple[str, ...]] = {
    "memcheck": (),
    "racecheck": ("--racecheck-report", "analysis"),  # one report per race, not one per hazard
    "initcheck": (),
    "synccheck": (),
}


def parse_tools(spec: str) -> tuple[str, ...]:
    """'memcheck,racecheck' -> ('memcheck', 'racecheck'), in the order given, each once; InputError
    naming the unknown tool and listing the valid ones otherwise."""
    tools = tuple(dict.fromkeys(t.strip() for t in spec.split(",") if t.strip()))
    unknown = [t for t in tools if t not in TOOLS]
    if unknown or not tools:
        what = f"unknown tool {unknown[0]!r}" if unknown else "no tool given"
        raise InputError(f"--sanitize: {what}; valid tools: {', '.join(TOOLS)}")
    return tools


def search_places(env: Mapping[str, str] | None = None) -> list[tuple[str, Path | None]]:
    """Where compute-sanitizer is looked for, in order: (what the place is, its folder or None for $PATH)."""
    env = os.environ if env is None else env
    places: list[tuple[str, Path | None]] = [("$PATH", None)]
    if env.get("CUDA_PATH"):
        places.append(("$CUDA_PATH/bin", Path(env["CUDA_PATH"]) / "bin"))
    places.append((str(CUDA_DEFAULT / "bin"), CUDA_DEFAULT / "bin"))
    return places


def find_sanitizer(env: Mapping[str, str] | None = None) -> Path:
    """The compute-sanitizer to run: on $PATH, else in $CUDA_PATH/bin, else in /usr/local/cuda/bin;
    ToolMissing (a skip) naming the places looked in otherwise."""
    env = os.environ if env is None else env
    places = search_places(env)
    for _what, folder in places:
        if folder is None:
            found = shutil.which(SANITIZER, path=env.get("PATH", ""))
            if found:
                return Path(found)
        elif (folder / SANITIZER).is_file() and os.access(folder / SANITIZER, os.X_OK):
            return folder / SANITIZER
    looked = ", ".join(what if folder is None or what.startswith("/") else f"{what} ({folder})"
                       for what, folder in places)
    raise ToolMissing(f"sanitize skipped: {SANITIZER} not found (looked in {looked})")


def sanitizer_command(sanitizer: Path | str, tool: str, child: Sequence[str]) -> list[str]:
    """The command line that runs `child` (a command, e.g. python -m strata_bench parity ...) under one tool."""
    return [str(sanitizer), "--tool", tool, "--error-exitcode", str(ERROR_EXITCODE),
            "--print-limit", str(PRINT_LIMIT), *COMMON_FLAGS, *TOOL_FLAGS[tool], *child]


def child_env(tool: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: this one, with the marker switch, unbuffered output and this package
    importable (the child runs `python -m strata_bench` from wherever the parent was started)."""
    env = dict(os.environ if env is None else env)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env[CHILD_ENV] = tool
    return env


# --- the child's side ---------------------------------------------------------------------------------
def child_tool() -> str | None:
    """The tool this process runs under when it is a `parity --sanitize` child, else None."""
    return os.environ.get(CHILD_ENV) or None


def prepare_child(cupy) -> None:
    """Every CuPy array an allocation of its own (no memory pool), for the sanitizer to see its bounds
    and whether it was written."""
    cupy.cuda.set_allocator(None)


def case_marker(name: str, device: int) -> str:
    return f"{CASE_MARKER}{name} @{device}"


def variant_marker(variant: str) -> str:
    return f"{VARIANT_MARKER}{variant}"


def print_marker(line: str) -> None:
    """On stderr, flushed, before the case's first launch."""
    print(line, file=sys.stderr, flush=True)


# --- reading the report --------------------------------------------------------------------------------
PREFIX = "========="
_MARKER = re.compile(re.escape(CASE_MARKER) + r"(?P<name>.+) @(?P<device>\d+)$")
_ERRORS = re.compile(r"ERROR SUMMARY: (\d+) errors?$")
_NOT_PRINTED = re.compile(r"ERROR SUMMARY: (\d+) errors? w(?:ere|as) not printed")
_RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
_AT = re.compile(r"^at (?P<where>.+?)\+(?P<offset>0x[0-9a-fA-F]+)(?: in \S+)?$")
_DEVICE_FRAME = re.compile(r"^Device Frame:\s*(?P<where>.+?)\+(?P<offset>0x[0-9a-fA-F]+)")
_RACE_AT = re.compile(r"(?P<access>(?:Write|Read|Atomic)\w* access) at (?P<where>.+?)\+(?P<offset>0x[0-9a-fA-F]+)")
_API = re.compile(r"^Program hit (?P<error>.+) on CUDA API call to (?P<call>\w+)\.?$")
_HAZARDS = re.compile(r"\s*\[\d+ hazards?\]$")
# Header lines that are no error of a kernel.
_NOT_ERRORS = ("COMPUTE-SANITIZER", "Target application returned an error", "LEAK SUMMARY")
# The sanitizer could not run the program at all.
_TOOL_FAILURES = ("Error: Target application terminated before first instrumented API call",
                  "Target application doesn't exist or is not a valid executable", "Error: Device not supported")
BEFORE_FIRST = "(before the first case)"
AFTER_LAST = "(after the last case)"
HARNESS_NOTE = " (a CuPy kernel: the harness's, not the family's)"


def kernel_name(where: str) -> str:
    """A reported function as its kernel's short name: no return type, no parameter list;
    `$kernel$mangled_fn` (an access inside a non-inlined device function) as the kernel.

    'void tmpl_oob<siq::fmt_q8, (int)2>(const float *, float *, int)' -> 'tmpl_oob<siq::fmt_q8, (int)2>'."""
    where = where.strip()
    if where.startswith("$") and where.count("$") >= 2:
        return where.split("$")[1]
    if where.endswith(")"):  # the parameter list: the last balanced (...)
        where = where[:_opening(where, len(where) - 1)].rstrip()
    # A return type ends at the first space outside brackets: 'void f<a, (int)2>' -> 'f<a, (int)2>'.
    depth = 0
    for i, ch in enumerate(where):
        depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(ch, 0)
        if ch == " " and depth == 0:
            return where[i + 1:].strip() or where[:i]
    return where


def _opening(text: str, close: int) -> int:
    """The index of the '(' that the ')' at `close` closes (0 when unbalanced)."""
    depth = 0
    for i in range(close, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return 0


@dataclass(frozen=True)
class Finding:
    """Reports of one error of one kernel in one case, counted."""

    tool: str
    case: str
    kernel: str
    message: str
    count: int = 1
    variant: str = ""  # the launch it followed; empty before the case's first launch (its inputs' upload)

    def line(self) -> str:
        kernel = self.kernel + (HARNESS_NOTE if self.kernel.startswith("cupy_") else "")
        times = f" ({self.count} reports)" if self.count > 1 else ""
        variant = f" [{self.variant}]" if self.variant else ""
        return f"{self.tool}: {self.case}{variant}: {kernel}: {self.message}{times}"


@dataclass
class _Record:
    header: str
    where: str | None = None
    frames: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)


@dataclass
class ToolReport:
    """What one tool's run said: its findings, the cases it ran (their markers), its summary counts."""

    tool: str
    cases: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    errors: int | None = None  # the ERROR SUMMARY's count (racecheck: errors + warnings); None: no summary
    not_printed: int = 0
    started: bool = False  # the sanitizer's banner was seen
    tool_failure: str | None = None  # the sanitizer could not run the program: its line
    exit_code: int | None = None
    seconds: float = 0.0
    tail: list[str] = field(default_factory=list)  # the child's own last lines (not the report)
    log: Path | None = None
    done: bool = False  # the case loop ran to its end (its last marker was seen)


class ReportReader:
    """Reads the merged output of a child under one tool, line by line (the text of a large report is
    never held whole): markers, error records, summary lines."""

    def __init__(self, tool: str, tail_lines: int = 12):
        self.report = ToolReport(tool)
        self._case = BEFORE_FIRST
        self._variant = ""
        self._devices: set[int] = set()
        self._record: _Record | None = None
        self._counts: dict[tuple[str, str, str, str], int] = {}
        self._order: list[tuple[str, str, str, str]] = []
        self._tail: deque[str] = deque(maxlen=tail_lines)

    def feed(self, line: str) -> None:
        line = line.rstrip("\r\n")
        marker = _MARKER.match(line)
        if marker:
            self._close()
            self._devices.add(int(marker["device"]))
            self._case = f"{marker['name']} @{marker['device']}"
            self._variant = ""
            self.report.cases.append(self._case)
            return
        if line.startswith(VARIANT_MARKER):
            self._close()
            self._variant = line[len(VARIANT_MARKER):]
            return
        if line == END_MARKER:
            self._close()
            self._case, self._variant = AFTER_LAST, ""
            self.report.done = True
            return
        if not line.startswith(PREFIX):
            self._close()
            if line.strip():
                self._tail.append(line)
            return
        body = line[len(PREFIX):]
        text = body.strip()
        if not text:  # the blank line that ends a record
            self._close()
            return
        if body.startswith("  "):  # '=========     at ...': a line of the record above
            self._continuation(text)
            return
        self._header(text)

    def feed_all(self, lines: Iterable[str]) -> ToolReport:
        for line in lines:
            self.feed(line)
        return self.finish()

    def _header(self, text: str) -> None:
        self._close()
        if m := _NOT_PRINTED.search(text):
            self.report.not_printed = int(m[1])
        elif m := _ERRORS.search(text):
            self.report.errors = int(m[1])
        elif m := _RACE_SUMMARY.search(text):
            self.report.errors = int(m[2]) + int(m[3])
            self.report.not_printed = max(0, self.report.errors - int(m[1]))
        elif text.startswith(_TOOL_FAILURES):
            self.report.tool_failure = text
        elif text == "COMPUTE-SANITIZER":
            self.report.started = True
        elif text.startswith(_NOT_ERRORS):
            pass
        else:
            self._record = _Record(text)

    def _continuation(self, text: str) -> None:
        record = self._record
        if record is None:
            return
        if m := _DEVICE_FRAME.match(text):
            record.frames.append(m["where"])
        elif m := _AT.match(text):
            if record.where is None:
                record.where = m["where"]
        elif text.startswith("and ") and "access at" in text:  # racecheck's second access
            record.extra.append(text)

    def _close(self) -> None:
        record, self._record = self._record, None
        if record is None:
            return
        kernel, message = self._describe(record)
        key = (self._case, self._variant, kernel, message)
        if key not in self._counts:
            self._order.append(key)
            self._counts[key] = 0
        self._counts[key] += 1

    @staticmethod
    def _describe(record: _Record) -> tuple[str, str]:
        """(kernel, message) of one error record."""
        if m := _API.match(record.header):
            return f"CUDA API call {m['call']}", m["error"]
        message = " ".join([record.header, *record.extra])
        where = record.frames[-1] if record.frames else record.where
        races = list(_RACE_AT.finditer(message))
        if where is None and races:
            where = races[0]["where"]
        kernel = kernel_name(where) if where else "(kernel not named)"
        # A race names both accesses' places: keep their offsets, not the kernel's name twice more.
        for race in reversed(races):
            if kernel_name(race["where"]) == kernel:
                message = message[:race.start("where")] + message[race.end("where"):]
        return kernel, _HAZARDS.sub("", message)

    def finish(self) -> ToolReport:
        self._close()
        one_device = len(self._devices) <= 1
        report = self.report
        report.cases = [_label(c, one_device) for c in report.cases]
        report.findings = []
        for key in self._order:
            case, variant, kernel, message = key
            report.findings.append(Finding(report.tool, _label(case, one_device), kernel, message, self._counts[key],
                                           variant))
        report.tail = list(self._tail)
        return report


def _label(case: str, one_device: bool) -> str:
    """'name @0' -> 'name' when the run used one device, else 'name (device 0)'."""
    name, sep, device = case.rpartition(" @")
    if not sep or not device.isdigit():
        return case
    return name if one_device else f"{name} (device {device})"


def parse_report(tool: str, text: str | Iterable[str]) -> ToolReport:
    """The report of one tool's run from its whole text (tests, saved logs)."""
    lines = text.splitlines() if isinstance(text, str) else text
    return ReportReader(tool).feed_all(lines)


# --- running one tool ----------------------------------------------------------------------------------
def run_tool(sanitizer: Path | str, tool: str, child: Sequence[str], log_path: Path | None = None,
             env: Mapping[str, str] | None = None, on_case: Callable[[str], None] | None = None) -> ToolReport:
    """Run `child` under one tool, reading its merged output as it comes (and writing it to log_path);
    the report with the exit code and the seconds taken. `on_case(name)` is told of each case as its
    marker arrives (a progress bar: the four tools take minutes)."""
    command = sanitizer_command(sanitizer, tool, child)
    reader = ReportReader(tool)
    started = time.perf_counter()
    log = open(log_path, "w", encoding="utf-8", errors="replace") if log_path is not None else None
    try:
        if log is not None:
            log.write("# " + " ".join(command) + "\n")
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env=child_env(tool, env), text=True, errors="replace", bufsize=1) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                if log is not None:
                    log.write(line)
                seen = len(reader.report.cases)
                reader.feed(line)
                if on_case is not None and len(reader.report.cases) > seen:
                    on_case(reader.report.cases[-1])
            code = proc.wait()
    finally:
        if log is not None:
            log.close()
    report = reader.finish()
    report.exit_code = code
    report.seconds = time.perf_counter() - started
    report.log = log_path
    return report


# --- what a run comes to -------------------------------------------------------------------------------
def raise_for_child(report: ToolReport) -> None:
    """A child that ended before its first case with parity's skip or usage code: NoGpu or InputError,
    with the child's last line (the outer command checked both already, so this is rare)."""
    last = report.tail[-1] if report.tail else "no output"
    if report.cases:
        return
    if report.exit_code == NoGpu.exit_code:
        raise NoGpu(f"sanitize skipped: {last}")
    if report.exit_code == InputError.exit_code:
        raise InputError(f"sanitize: the {report.tool} run refused its options: {last}")


def problems(report: ToolReport) -> list[str]:
    """Lines for what went wrong in a tool's run beside its findings: the program not run, a run cut
    short, errors the report does not attribute or did not print, parity failing with no sanitizer error.
    Empty when all is well."""
    tool = report.tool
    last = report.tail[-1] if report.tail else "no output"
    if report.tool_failure or not report.started:
        return [f"{tool}: {SANITIZER} did not run the cases: {report.tool_failure or last}"]
    if report.errors is None:
        return [f"{tool}: the run ended (exit code {report.exit_code}) before the sanitizer's summary: {last}"]
    lines = []
    attributed = sum(f.count for f in report.findings)
    if report.errors > attributed + report.not_printed:
        lines.append(f"{tool}: {report.errors - attributed - report.not_printed} errors of the summary are not in "
                     "the report's lines (see the log)")
    if report.not_printed:
        lines.append(f"{tool}: {report.not_printed} more errors were not printed (the limit is {PRINT_LIMIT}): later "
                     "cases may have findings not listed here (see the log)")
    if not report.findings and report.exit_code not in (0, ERROR_EXITCODE):
        lines.append(f"{tool}: the launches failed under {SANITIZER} (exit code {report.exit_code}) with no "
                     f"sanitizer error: {last}")
    elif report.exit_code == 0 and not report.done:
        lines.append(f"{tool}: the case loop did not reach its end: {last}")
    return lines


def summary_line(report: ToolReport, skip_note: str = "") -> str:
    """'racecheck: 384 cases, 0 findings (61.2 s), 68 skipped (why); log: PATH' (skip_note: ToolPlan's)."""
    cases = len(report.cases)
    findings = len(report.findings)
    log = f"; log: {report.log}" if report.log is not None else ""
    return (f"{report.tool}: {cases} case{'s' if cases != 1 else ''}, {findings} finding{'s' if findings != 1 else ''}"
            f" ({report.seconds:.1f} s){skip_note}{log}")


# At most two tools at once: each is its own process and CUDA context on the one GPU (the sanitizer's
# processes share a GPU as any two do), and each keeps a few CPU cores busy with its instrumentation.
MAX_CONCURRENT = 2


def run_tools(sanitizer: Path | str, runs: Sequence[tuple[str, Sequence[str], Path | None, Mapping[str, str]]],
              on_case: Callable[[str, str], None] | None = None) -> list[ToolReport]:
    """Each (tool, child, log path, env) run, MAX_CONCURRENT at a time; the reports in the order given.
    on_case(tool, case) is told of each case as its tool reaches it."""
    from concurrent.futures import ThreadPoolExecutor

    def one(tool: str, child: Sequence[str], log: Path | None, env: Mapping[str, str]) -> ToolReport:
        told = None if on_case is None else (lambda case: on_case(tool, case))
        return run_tool(sanitizer, tool, child, log, env, told)

    with ThreadPoolExecutor(max_workers=MAX_CONCURRENT) as pool:
        futures = [pool.submit(one, *run) for run in runs]
        return [future.result() for future in futures]
