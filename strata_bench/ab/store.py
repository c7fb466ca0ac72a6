"""A/B results on disk: the summary beside the records, a partial one after an interruption, and
every case's outcome rebuilt from the records alone (so a report agrees with the data it shows)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from strata_bench.ab.plan import Plan, plan_from_json
from strata_bench.ab.records import AbOutcome, RunRecord
from strata_bench.ab.runner import judge, reject
from strata_bench.errors import InputError
from strata_bench.results.store import ResultsWriter, read_records


def finish(writer: ResultsWriter, outcomes: Sequence[AbOutcome], interrupted: bool = False) -> Path:
    """Write the summary file next to the records (schema and provenance come from the writer)."""
    body = {"cases": [o.summary() for o in outcomes], "interrupted": interrupted}
    return writer.finish(body, failures=sum(len(o.failures) + bool(o.rejected) for o in outcomes))


def finish_partial(writer: ResultsWriter) -> Path | None:
    """After Ctrl-C, SIGTERM or a crash: a summary of the runs that finished, marked interrupted; its
    path, or None when it could not be written. Never masks the original exception (the records file
    alone is still a complete account)."""
    try:
        writer.close()
        outcomes = outcomes_from_records(read_records(writer.records_path))
        body = {"cases": [o.summary() for o in outcomes], "interrupted": True}
        return writer.finish(body, failures=sum(len(o.failures) + bool(o.rejected) for o in outcomes))
    except Exception:  # noqa: BLE001 - best effort only
        return None


def outcomes_from_records(records: Sequence[Mapping[str, Any]]) -> list[AbOutcome]:
    """Rebuild every case's outcome from an ab JSONL (plan record first, then its runs)."""
    plans: dict[str, tuple[Plan, dict]] = {}
    runs: dict[str, list[RunRecord]] = {}
    stopped: dict[str, str] = {}
    interrupted: dict[str, str] = {}
    rejected: dict[str, str] = {}
    for body in records:
        kind, case = body.get("record"), body.get("case", "")
        if kind == "plan":
            plans[case] = (plan_from_json(body), body.get("arms", {}))
            runs[case] = []
        elif kind == "run":
            runs.setdefault(case, []).append(RunRecord.from_json(body))
        elif kind == "extended" and case in plans:
            plan, arms = plans[case]
            plans[case] = (replace(plan, pairs=int(body.get("pairs", plan.pairs))), arms)
        elif kind == "stopped":
            stopped[case] = body.get("reason", "")
        elif kind == "interrupted":
            interrupted[case] = body.get("error", "")
        elif kind == "rejected":
            rejected[case] = body.get("reason", "")
    missing = [c for c in runs if c not in plans]
    if missing:
        raise InputError(f"ab records without a plan record for case {missing[0]!r}")
    outcomes = [judge(case, plans[case][0], plans[case][1], runs[case], stopped.get(case, ""),
                      interrupted.get(case, "")) for case in plans]
    return [reject(o, rejected[o.case]) if o.case in rejected else o for o in outcomes]
