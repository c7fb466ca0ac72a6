"""What binds a timed kernel, from Nsight Compute's CSV (issue 37, item 4): the parsing side of `bench --profile`.

`ncu_command` gives the profiler's command line for a bench run (the four metrics below, base units, CSV);
`parse_csv` reads its output, in either of ncu's CSV layouts (the default details page: one row per kernel
launch and metric; `--page raw`: one row per launch, one column per metric, a units row under the header);
`profile_row` turns the launches of one timed call into the row bench prints:
- instructions per weight: warp instructions executed (smsp__inst_executed.sum, or sm__inst_executed.sum) x 32,
  over the case's weights (rows x cols): the issue slots a weight costs, in threads, the unit of the issue
  budget (an H200 issues about 3.3e13 thread-instructions a second: 132 SMs x 4 schedulers x 1.98 GHz x 32);
- DRAM bytes (dram__bytes_read.sum, plus dram__bytes_write.sum where profiled) against the byte model bench's
  GB/s divides by (Family.bytes_moved): `bytes_off` is flagged beyond BYTES_TOLERANCE (5%), where the GB/s
  column no longer says what the DRAM did (an L2-resident copy, a re-read, a model that forgot a buffer);
- issue-slot utilisation (smsp__issue_active.avg.pct_of_peak_sustained_active, or sm__inst_issued's) and DRAM
  throughput (dram__throughput.avg.pct_of_peak_sustained_elapsed), of the call's longest launch (by
  gpu__time_duration.sum where profiled, else by instructions): the kernel that sets the call's time;
- the bound: `read` or `issue`, whichever of the two is the busier, or `latency` when neither reaches
  LATENCY_BELOW (60%): the warps then wait on dependences with both the DRAM and the schedulers idle.
Without ncu (or without the counters' permission, or with no launch profiled) the row's `blank` says why.
Units are converted to base units (byte, inst, %) where ncu scaled them (Kbyte, Mbyte, Ginst; SI prefixes).
"""
from __future__ import annotations

import csv
import io
import math
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from strata_bench.errors import InputError

INST = ("smsp__inst_executed.sum", "sm__inst_executed.sum")  # warp instructions, either spelling
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
ISSUE = ("smsp__issue_active.avg.pct_of_peak_sustained_active", "sm__inst_issued.avg.pct_of_peak_sustained_active")
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
DURATION = "gpu__time_duration.sum"
METRICS = (INST[0], DRAM_READ, DRAM_WRITE, ISSUE[0], DRAM_PCT, DURATION)  # what ncu_command asks for
BYTES_TOLERANCE = 0.05  # |DRAM bytes / model - 1| beyond this flags the row
LATENCY_BELOW = 60.0  # % : neither the issue slots nor the DRAM this busy -> latency
THREADS_PER_WARP = 32

_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_UNIT = re.compile(r"^(?P<prefix>[KMGT]?)(?P<base>byte|inst|warp|cycle|second|nsecond|usecond|msecond)$")
_TIME = {"second": 1.0, "msecond": 1e-3, "usecond": 1e-6, "nsecond": 1e-9}


@dataclass
class Launch:
    """One profiled kernel launch: ncu's ID, the kernel's name as ncu prints it, its metrics in base units."""

    id: int
    kernel: str
    metrics: dict[str, float] = field(default_factory=dict)

    def get(self, names: str | Sequence[str]) -> float | None:
        for name in (names,) if isinstance(names, str) else names:
            if name in self.metrics and not math.isnan(self.metrics[name]):
                return self.metrics[name]
        return None


@dataclass(frozen=True)
class ProfileRow:
    """The profile columns of one bench row; every figure None and `blank` set where there is no profile."""

    inst_per_weight: float | None = None
    dram_bytes: float | None = None
    model_bytes: int | None = None
    bytes_off: bool | None = None  # DRAM bytes differ from the model by more than BYTES_TOLERANCE
    issue_pct: float | None = None
    dram_pct: float | None = None
    bound: str | None = None  # "read", "issue" or "latency"
    blank: str | None = None  # why the row has no profile
    kernels: tuple[str, ...] = ()
    main: str | None = None  # the longest launch's kernel: the utilisations are its

    @property
    def bytes_ratio(self) -> float | None:
        if self.dram_bytes is None or not self.model_bytes:
            return None
        return self.dram_bytes / self.model_bytes

    def to_record(self) -> dict:
        return {"inst_per_weight": self.inst_per_weight, "dram_bytes": self.dram_bytes,
                "model_bytes": self.model_bytes, "bytes_ratio": self.bytes_ratio, "bytes_off": self.bytes_off,
                "issue_pct": self.issue_pct, "dram_pct": self.dram_pct, "bound": self.bound, "blank": self.blank,
                "kernels": list(self.kernels), "main": self.main}


def to_base(value: str, unit: str) -> float:
    """A value as ncu prints it ("1,234.5", "n/a") in `unit` ("Mbyte", "%", "inst", "usecond"), in base units
    (byte, inst, %, second)."""
    text = value.strip().replace(",", "")
    if text in ("", "n/a", "N/A", "nan"):
        return math.nan
    try:
        number = float(text)
    except ValueError:
        raise InputError(f"ncu: not a number: {value!r} ({unit})") from None
    unit = unit.strip()
    if unit in ("", "%"):
        return number
    m = _UNIT.match(unit)
    if m is None:
        return number  # a unit with no scale to undo (e.g. "byte/second" is not asked for)
    scale = _PREFIX[m.group("prefix")]
    return number * scale * _TIME.get(m.group("base"), 1.0)


def parse_csv(text: str) -> list[Launch]:
    """The launches of `ncu --csv` output (details page or `--page raw`), in ID order; the ==PROF== and other
    lines before the header are skipped. InputError when there is no CSV header at all."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise InputError("ncu: no CSV header (\"ID\", ...) in the output" + (f": {blank_reason(text)}"
                                                                            if blank_reason(text) else ""))
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = rows[0]
    if "Metric Name" in header:
        return _details(header, rows[1:])
    return _raw(header, rows[1:])


def _details(header: list[str], rows: list[list[str]]) -> list[Launch]:
    col = {name: i for i, name in enumerate(header)}
    launches: dict[int, Launch] = {}
    for row in rows:
        if len(row) < len(header):
            continue
        lid = int(row[col["ID"]])
        launch = launches.setdefault(lid, Launch(lid, row[col["Kernel Name"]]))
        launch.metrics[row[col["Metric Name"]]] = to_base(row[col["Metric Value"]], row[col["Metric Unit"]])
    return [launches[k] for k in sorted(launches)]


def _raw(header: list[str], rows: list[list[str]]) -> list[Launch]:
    if not rows or "Kernel Name" not in header:
        raise InputError("ncu: a raw-page CSV needs a units row and a 'Kernel Name' column")
    units, data = rows[0], rows[1:]
    col = {name: i for i, name in enumerate(header)}
    metric_cols = [i for i, name in enumerate(header) if "__" in name]
    out = []
    for row in data:
        if len(row) < len(header):
            continue
        metrics = {header[i]: to_base(row[i], units[i]) for i in metric_cols}
        out.append(Launch(int(row[col["ID"]]), row[col["Kernel Name"]], metrics))
    return sorted(out, key=lambda launch: launch.id)


def bound_of(issue_pct: float | None, dram_pct: float | None) -> str | None:
    """`read`, `issue` or `latency` (module docstring); None when either figure is missing."""
    if issue_pct is None or dram_pct is None:
        return None
    if max(issue_pct, dram_pct) < LATENCY_BELOW:
        return "latency"
    return "read" if dram_pct >= issue_pct else "issue"


def profile_row(launches: Iterable[Launch], weights: int, model_bytes: int) -> ProfileRow:
    """The row of one timed call from its profiled launches (every kernel the call runs: q8_1's and the
    mat-vec's); instructions and bytes are the call's sums, the utilisations its longest launch's."""
    launches = list(launches)
    if not launches:
        return ProfileRow(blank="ncu profiled no launch of this row's kernels", model_bytes=model_bytes)
    missing = [n for n, names in (("instructions", INST), ("DRAM bytes read", (DRAM_READ,)),
                                  ("issue utilisation", ISSUE), ("DRAM throughput", (DRAM_PCT,)))
               if all(launch.get(names) is None for launch in launches)]
    if missing:
        return ProfileRow(blank=f"ncu gave no {', '.join(missing)} (metrics: {', '.join(METRICS)})",
                          model_bytes=model_bytes, kernels=tuple(launch.kernel for launch in launches))
    inst = sum(launch.get(INST) or 0.0 for launch in launches)
    dram = sum((launch.get(DRAM_READ) or 0.0) + (launch.get(DRAM_WRITE) or 0.0) for launch in launches)
    main = max(launches, key=lambda launch: (launch.get(DURATION) or 0.0, launch.get(INST) or 0.0))
    issue, dram_pct = main.get(ISSUE), main.get(DRAM_PCT)
    return ProfileRow(inst_per_weight=THREADS_PER_WARP * inst / weights, dram_bytes=dram, model_bytes=model_bytes,
                      bytes_off=abs(dram / model_bytes - 1.0) > BYTES_TOLERANCE if model_bytes else None,
                      issue_pct=issue, dram_pct=dram_pct, bound=bound_of(issue, dram_pct),
                      kernels=tuple(launch.kernel for launch in launches), main=main.kernel)


def unavailable() -> str | None:
    """Why no row can have a profile on this host (no ncu), or None."""
    return None if find_ncu() else "ncu not found (Nsight Compute: put ncu on PATH or set STRATA_NCU)"


NO_KERNEL = "ncu profiled no kernel (the -k filter matched none of the launches)"


def blank_reason(output: str, returncode: int = 0) -> str | None:
    """Why ncu's run gave no profile, from its output and exit code; None where the output may hold one."""
    if "ERR_NVGPUCTRPERM" in output:
        return ("ncu may not read the GPU's performance counters here (ERR_NVGPUCTRPERM: root, or the driver's "
                "NVreg_RestrictProfilingToAdminUsers=0)")
    if "No kernels were profiled" in output:
        return NO_KERNEL
    if returncode != 0:
        last = next((line for line in reversed(output.splitlines()) if "==ERROR==" in line), "")
        return f"ncu exited {returncode}" + (f": {last.split('==ERROR==', 1)[1].strip()}" if last else "")
    return None


def find_ncu() -> str | None:
    return os.environ.get("STRATA_NCU") or shutil.which("ncu")


def ncu_command(argv: Sequence[str], kernel_regex: str | None = None, ncu: str | None = None,
                count: int | None = None) -> list[str]:
    """ncu around a command (a bench run of the row's case), asking for METRICS in base units as CSV; the clocks
    are left as the bench runs them (--clock-control none); `count` launches at most (-c)."""
    cmd = [ncu or find_ncu() or "ncu", "--csv", "--print-units", "base", "--clock-control", "none",
           "--metrics", ",".join(METRICS)]
    if kernel_regex:
        cmd += ["-k", f"regex:{kernel_regex}"]
    if count:
        cmd += ["-c", str(count)]
    return cmd + list(argv)


def bench_record(results: Path, variant: str) -> dict | None:
    """The record bench wrote for `variant` under a --results folder (its byte model is the row's), or None."""
    import json

    for path in sorted(results.rglob("bench-*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("variant") == variant and record.get("bytes"):
                return record
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """One mmvq row's profile columns from a real capture (gpu_suite's `ncu-rows` step): ncu around a short
    bench of the case, its first launch of `new`'s mat-vec kernel (mmvq_new or mmvq_mma; old's is mmvq_old and
    q8_1's share of the call is below 0.1% of its bytes at these shapes), the byte model from the record that
    bench wrote, the CSV kept, the row printed. Exit 0 with a row, 1 when the row is blank (the reason printed)."""
    import argparse
    import subprocess
    import sys
    import tempfile

    parser = argparse.ArgumentParser(prog="python -m strata_bench.kernels.ncu", description=main.__doc__)
    parser.add_argument("--format", required=True)
    parser.add_argument("--shape", default="131072x8192")
    parser.add_argument("--cols", type=int, default=1)
    parser.add_argument("--variant", default="new")
    parser.add_argument("--kernel", default="mmvq_new|mmvq_mma", help="ncu's -k regex (the first match is profiled)")
    parser.add_argument("--out", help="keep ncu's output here")
    args = parser.parse_args(argv)
    name = f"mmvq/{args.format}/{args.shape}/n{args.cols}"
    if (reason := unavailable()) is not None:
        print(f"{name}: blank: {reason}")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        bench = [sys.executable, "-m", "strata_bench", "bench", "-q", "--family", "mmvq", "--format", args.format,
                 "--shape", args.shape, "--cols", str(args.cols), "--budget", "0.05", "--results", tmp]
        proc = subprocess.run(ncu_command(bench, args.kernel, count=1), capture_output=True, text=True)
        record = bench_record(Path(tmp), args.variant)
    output = proc.stdout + proc.stderr
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(output)
    blank = blank_reason(output, proc.returncode)
    if not blank and record is None:
        blank = f"bench wrote no record of variant {args.variant} (its byte model)"
    try:
        row = None if blank else profile_row(parse_csv(proc.stdout), record["rows"] * record["cols"], record["bytes"])
    except InputError as exc:
        blank = str(exc)
    if blank or row is None or row.blank:
        print(f"{name}: blank: {blank or row.blank}")
        return 1
    print("| row | kernel | thread-instr / weight | DRAM bytes | model bytes | DRAM / model | issue % | DRAM % "
          "| bound |")
    print("|---|---|---|---|---|---|---|---|---|")
    flag = " (off by more than 5%)" if row.bytes_off else ""
    kernel = row.main.split("(")[0].removeprefix("void ")
    print(f"| {name} | {kernel} | {row.inst_per_weight:.2f} | {row.dram_bytes:.4g} | "
          f"{row.model_bytes} | {row.bytes_ratio:.3f}{flag} | {row.issue_pct:.1f} | {row.dram_pct:.1f} | {row.bound} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
