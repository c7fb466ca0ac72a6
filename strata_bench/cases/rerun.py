"""The one command line that reruns a case alone, for a failure's report: the run's own declared options
(cases/spec.RunSpec.argv: the filter, every extension, the sweep and real weights, the device) narrowed to
the case, each word shell-quoted. An option or extension a run can have is therefore in its rerun too."""
from __future__ import annotations

import shlex

from strata_bench.cases.case import Case
from strata_bench.cases.spec import RunSpec

PROGRAM = "strata-bench"


def rerun_command(case: Case, spec: RunSpec | None = None, device: int | None = None,
                  command: str = "parity") -> str:
    """`strata-bench parity --family F --format T -k '^name$' ...`: the command that runs `case` alone,
    selected by the same spec that selected it, on `device` (default: the spec's)."""
    narrowed = (spec or RunSpec()).narrowed(case, device)
    return shlex.join([PROGRAM, command, *narrowed.argv()])
