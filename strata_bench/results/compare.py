"""Compare two results files of one kind, case by case (the logic; strata_bench.report.compare renders it).

The files must come from the same device, driver, clocks policy and kernel sources
(strata_bench.results.guard: the closures of the families both measured, else the kernels_src hash),
unless the caller allows a difference. Records are matched by their kind's key (case, and variant for
bench, arm for ab). Each case's NEW/OLD comes with an interval and a p-value from its samples (a bench
record's samples_us, an ab file's runs; strata_bench.stats.ratio); the p-values of all cases are
adjusted by Benjamini-Hochberg, so that among the cases called FASTER or SLOWER the expected share of
false calls stays at 1 - confidence. A case whose interval lies inside +/-threshold is SAME. Cases with
one value a side get the bare ratio, labelled so, outside the BH step. Parity files compare status: a
case that passed in OLD and does not pass in NEW is a regression.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from strata_bench.errors import InputError
from strata_bench.results.views import VIEWS, View, frame
from strata_bench.results.load import Loaded, load
from strata_bench.results.guard import Difference, ProvenanceMismatch, check_conditions, refusal
from strata_bench.stats.criteria import Criteria
from strata_bench.stats.intervals import Interval
from strata_bench.stats.ratio import GeometricMean, RatioEstimate, benjamini_hochberg, geometric_mean, sample_ratio
from strata_bench.results.ab_records import SECONDS_PER
from strata_bench.stats.verdict import Verdict, signed_percent, unsigned_percent

VERDICT_ORDER = ("FASTER", "SLOWER", "SAME", "UNDECIDED")
STATUS_ORDER = ("SAME", "CHANGED", "REGRESSION")


@dataclass(frozen=True)
class CaseResult:
    """One case judged: NEW/OLD with its interval and p-value, the BH-adjusted q, the verdict and why."""

    estimate: RatioEstimate
    q: float | None  # None: single values, outside the BH step
    verdict: Verdict
    reason: str
    regression: bool = False
    regression_reason: str = ""

    @property
    def ratio(self) -> float:
        return self.estimate.ratio

    @property
    def rel_ci(self) -> Interval | None:
        return self.estimate.rel_ci


@dataclass(frozen=True)
class CaseDelta:
    """One case matched across OLD and NEW: its values (or parity status) on each side and the verdict."""

    key: tuple[str, ...]
    old: tuple[float, ...] | str  # every finite value, or the parity status
    new: tuple[float, ...] | str
    result: CaseResult | None
    status_change: str = ""  # parity: "PASS -> FAIL"
    regression: bool = False

    @property
    def name(self) -> str:
        return " / ".join(self.key)

    @property
    def verdict(self) -> str:
        """FASTER/SLOWER/SAME/UNDECIDED, or for parity SAME/CHANGED/REGRESSION."""
        if self.result is not None:
            return self.result.verdict.value
        return "REGRESSION" if self.regression else ("SAME" if self.old == self.new else "CHANGED")


@dataclass(frozen=True)
class FileComparison:
    """Every matched case of two files, the cases found in only one of them, and the file-level summary."""

    kind: str
    value_column: str
    deltas: tuple[CaseDelta, ...]
    only_old: tuple[str, ...]
    only_new: tuple[str, ...]
    unit: str = ""  # of the compared values, where the file records it (ab plans)
    criteria: Criteria = Criteria()
    geomean: GeometricMean | None = None
    geomean_note: str = ""  # why there is none, where that is not obvious
    differences: tuple[Difference, ...] = ()  # conditions that differ (compared only when allowed)
    unchecked: tuple[str, ...] = ()  # conditions one or both files do not record

    @property
    def regressions(self) -> list[CaseDelta]:
        return [d for d in self.deltas if d.regression]

    @property
    def counts(self) -> dict[str, int]:
        """Cases per verdict, in a fixed order (zeros kept, so a reader can rely on the keys)."""
        order = STATUS_ORDER if self.kind == "parity" else VERDICT_ORDER
        return {v: sum(d.verdict == v for d in self.deltas) for v in order}

    @property
    def n_tested(self) -> int:
        """Cases in the Benjamini-Hochberg step (those with an interval)."""
        return sum(d.result is not None and d.result.q is not None for d in self.deltas)


def compare_files(old_path: str | Path, new_path: str | Path, criteria: Criteria,
                  higher_is_better: bool | None = None, allow_different: bool = False) -> FileComparison:
    """Match records by case key; NEW/OLD, interval and verdict per case (or a status change for parity).

    ProvenanceMismatch (an InputError) when the files differ in device, driver, clocks policy or
    kernel sources, unless `allow_different`; the differences are then carried in the result."""
    old, new = load(old_path), load(new_path)
    if old.kind != new.kind:
        raise InputError(f"cannot compare a {old.kind!r} file with a {new.kind!r} file")
    differences, unchecked = check_conditions(_provenance(old), _provenance(new))
    if differences and not allow_different:
        raise ProvenanceMismatch(refusal(differences))
    result = _compare_loaded(old, new, criteria, higher_is_better)
    return FileComparison(result.kind, result.value_column, result.deltas, result.only_old, result.only_new,
                          result.unit, result.criteria, result.geomean, result.geomean_note, differences, unchecked)


def _provenance(loaded: Loaded) -> Mapping[str, Any]:
    return dict((loaded.summary or {}).get("provenance") or {})


def _compare_loaded(old: Loaded, new: Loaded, criteria: Criteria, higher_is_better: bool | None) -> FileComparison:
    view = VIEWS.get(old.kind, View((), ("case",), ("value",)))
    old_df = _without_rejected(old, frame(old, all_columns=True))
    new_df = _without_rejected(new, frame(new, all_columns=True))
    key = [k for k in view.key if k in old_df.columns and k in new_df.columns]
    if not key:
        raise InputError(f"{old.path.name}: records have no {'/'.join(view.key)} column to match cases by")
    if old.kind == "parity":
        return _compare_status(old_df, new_df, key)
    if old.kind == "ab" and (_has_metrics(old) or _has_metrics(new)):
        return _compare_ab_metrics(old, new, criteria, higher_is_better)
    column = next((v for v in view.values if v in old_df.columns and v in new_df.columns), None)
    if column is None:
        raise InputError(f"{old.kind} records carry none of {', '.join(view.values) or 'value'}: nothing to compare")
    if higher_is_better is None:
        higher_is_better = _file_direction(old) if old.kind == "ab" else view.higher_is_better
    crit = Criteria(higher_is_better, criteria.same_band, criteria.fail_on_regression, criteria.confidence)
    unit = _file_unit(old) if old.kind == "ab" else ""
    old_s = _scaled(_samples(old_df, key, column, _raw_samples(old, view)), _to_unit(old, unit))
    new_s = _scaled(_samples(new_df, key, column, _raw_samples(new, view)), _to_unit(new, unit))
    matched = [(k, old_s[k], new_s[k], higher_is_better) for k in old_s if k in new_s]
    return _judged(old.kind, column, matched, crit, _names(old_s, new_s), _names(new_s, old_s), unit)


def _without_rejected(loaded: Loaded, df):
    """Records whose timings were rejected (timed output differs, impossible time: timing/verify.py) are
    not results: bench variants by their status, ab cases by their "rejected" record. They then show as
    only in one file."""
    from strata_bench.timing.verify import IMPOSSIBLE, TIMED_OUTPUT_DIFFERS

    if "status" in df.columns:
        df = df[~df["status"].astype(str).str.startswith((TIMED_OUTPUT_DIFFERS, IMPOSSIBLE))]
    rejected = {r.get("case") for r in loaded.records if r.get("record") == "rejected"}
    if rejected and "case" in df.columns:
        df = df[~df["case"].isin(rejected)]
    return df


def _has_metrics(loaded: Loaded) -> bool:
    return any(r.get("record") == "run" and r.get("metrics") for r in loaded.records)


def _metric_samples(loaded: Loaded) -> dict[tuple[str, ...], list[float]]:
    """(case, arm, metric) -> every measured value of that metric (warm-ups and failures left out)."""
    out: dict[tuple[str, ...], list[float]] = {}
    for r in loaded.records:
        if r.get("record") != "run" or r.get("warmup") or r.get("failure"):
            continue
        for name in r.get("metric_order") or sorted(r.get("metrics") or {}):
            value = (r.get("metrics") or {}).get(name)
            if isinstance(value, (int, float)) and math.isfinite(value):
                out.setdefault((str(r.get("case", "")), str(r["arm"]), name), []).append(float(value))
    return out


def _compare_ab_metrics(old: Loaded, new: Loaded, criteria: Criteria, higher_is_better: bool | None) -> FileComparison:
    """A/B files with several metrics: a row per case, arm and metric, each with its own direction."""
    directions = {str(n): bool(h) for n, h in _plan_record(old).get("directions", [])}
    default = _file_direction(old) if higher_is_better is None else higher_is_better
    old_s, new_s = _metric_samples(old), _metric_samples(new)
    matched = []
    for key in [k for k in old_s if k in new_s]:
        up = directions.get(key[2].split("[", 1)[0], default) if higher_is_better is None else higher_is_better
        matched.append((key, old_s[key], new_s[key], up))
    return _judged("ab", "metrics", matched, criteria, _names(old_s, new_s), _names(new_s, old_s), _file_unit(old))


def _plan_record(loaded: Loaded) -> Mapping[str, Any]:
    return next((r for r in loaded.records if r.get("record") == "plan"), {})


def _file_direction(loaded: Loaded) -> bool:
    return bool(dict(_plan_record(loaded).get("criteria", {})).get("higher_is_better", False))


def _file_unit(loaded: Loaded) -> str:
    """The unit an A/B's figures are shown in (its plan's --unit)."""
    return str(_plan_record(loaded).get("unit", ""))


def _to_unit(loaded: Loaded, unit: str) -> float:
    """The factor from the unit a file's run values are recorded in (its plan's value_unit: a command A/B's
    wall time in s, a kernel A/B's us) to `unit`; 1 where either is not a time unit. Labelled with `unit`
    unconverted, a command A/B with --unit ms showed 0.07685 ms for 76.85 ms."""
    plan = _plan_record(loaded)
    own = plan.get("value_unit") or plan.get("unit", "")
    if own in SECONDS_PER and unit in SECONDS_PER:
        return SECONDS_PER[own] / SECONDS_PER[unit]
    return 1.0


def _scaled(samples: dict[tuple[str, ...], list[float]], factor: float) -> dict[tuple[str, ...], list[float]]:
    return samples if factor == 1.0 else {k: [v * factor for v in vs] for k, vs in samples.items()}


def _raw_samples(loaded: Loaded, view: View) -> list[Any]:
    """Each framed record's samples_us as recorded (the frame shortens lists to text), by frame row."""
    wanted = view.record_filter
    return [r.get("samples_us") for r in loaded.records if all(r.get(k) == v for k, v in wanted.items())]


def _samples(df, key: list[str], column: str, raw: list[Any]) -> dict[tuple[str, ...], list[float]]:
    """Every finite value per case key: a record's samples_us where it has them (bench), else its
    `column`; warm-up runs (ab) are left out. `raw` holds each frame row's samples_us (None if none)."""
    if "warmup" in df.columns:
        df = df[~df["warmup"].fillna(False).astype(bool)]
    out: dict[tuple[str, ...], list[float]] = {}
    for index, row in zip(df.index, df.to_dict("records")):
        samples = raw[index]
        values = list(samples) if isinstance(samples, (list, tuple)) and len(samples) else [row.get(column)]
        finite = [float(v) for v in values
                  if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
        if finite:
            out.setdefault(tuple(str(row[k]) for k in key), []).extend(finite)
    return out


def _judged(kind: str, column: str, matched: list, criteria: Criteria, only_old: tuple[str, ...],
            only_new: tuple[str, ...], unit: str = "") -> FileComparison:
    """Judge every matched (key, old values, new values, higher_is_better): estimates first, then the
    BH step over every case that has a p-value, then each verdict with its q."""
    estimates = [sample_ratio(o, n, criteria.confidence) for _, o, n, _ in matched]
    tested = [i for i, e in enumerate(estimates) if e.p is not None]
    qs: list[float | None] = [None] * len(estimates)
    for i, q in zip(tested, benjamini_hochberg([estimates[i].p for i in tested])):
        qs[i] = q
    deltas = []
    for (key, o, n, up), est, q in zip(matched, estimates, qs):
        crit = Criteria(up, criteria.same_band, criteria.fail_on_regression, criteria.confidence)
        result = judge(est, q, crit, len(tested))
        deltas.append(CaseDelta(key, tuple(o), tuple(n), result, regression=result.regression))
    directions = {up for *_, up in matched}
    mean, note = None, ""
    if len(directions) > 1:
        note = "no geometric mean: the metrics differ in direction (higher or lower is better)"
    else:
        mean = geometric_mean([e.ratio for e in estimates], criteria.confidence)
    return FileComparison(kind, column, tuple(deltas), only_old, only_new, unit, criteria, mean, note)


def judge(est: RatioEstimate, q: float | None, crit: Criteria, n_tested: int = 1) -> CaseResult:
    """The verdict on one case.

    SAME: the interval lies inside +/-threshold (an equivalence statement). FASTER or SLOWER: the
    interval excludes no change, the case survives Benjamini-Hochberg (q <= 1 - confidence) and the
    estimate is beyond the threshold. Anything else is UNDECIDED, with the reason. A regression is a
    case that survives BH whose interval puts NEW worse by more than fail_on_regression."""
    if est.ci is None or q is None:
        return _judge_single(est, crit)
    band, alpha, rel, shift = crit.same_band, 1 - crit.confidence, est.rel_ci, est.ratio - 1
    if -band <= rel.low and rel.high <= band:
        verdict, reason = Verdict.SAME, f"interval inside the +/-{unsigned_percent(band)} threshold"
    elif rel.excludes(0) and q <= alpha and abs(shift) > band:
        verdict, better = _direction(shift > 0, crit)
        good = "higher" if crit.higher_is_better else "lower"
        reason = f"NEW is {better} ({good} is better), beyond the +/-{unsigned_percent(band)} threshold"
    elif not rel.excludes(0):
        verdict, reason = Verdict.UNDECIDED, (f"interval includes no change and reaches past the "
                                              f"+/-{unsigned_percent(band)} threshold; more samples may decide")
    elif q > alpha:
        cases = f"{n_tested} case{'s' if n_tested != 1 else ''}"
        verdict, reason = Verdict.UNDECIDED, (f"a change alone (p={est.p:.2g}), not after Benjamini-Hochberg "
                                              f"over {cases} (q={q:.2g} > {alpha:.2g})")
    else:
        verdict, reason = Verdict.UNDECIDED, (f"a change is resolved ({signed_percent(shift)}) but lies within "
                                              f"the +/-{unsigned_percent(band)} threshold")
    regressed, why = _regression(rel, q <= alpha, crit)
    return CaseResult(est, q, verdict, reason, regressed, why)


def _direction(new_higher: bool, crit: Criteria) -> tuple[Verdict, str]:
    return (Verdict.FASTER, "better") if new_higher == crit.higher_is_better else (Verdict.SLOWER, "worse")


def _regression(rel: Interval, discovered: bool, crit: Criteria) -> tuple[bool, str]:
    limit = crit.fail_on_regression
    if limit is None:
        return False, ""
    worse_low = -rel.high if crit.higher_is_better else rel.low  # NEW worse by at least this
    worse_high = max(0.0, -rel.low if crit.higher_is_better else rel.high)
    at_least, beyond = unsigned_percent(worse_low), unsigned_percent(limit)
    if worse_low > limit and discovered:
        return True, f"regression: NEW is worse by at least {at_least}, beyond {beyond}"
    if worse_low > limit:
        return False, f"worse by at least {at_least}, but not a discovery after Benjamini-Hochberg"
    return False, f"no regression beyond {beyond} (NEW worse by at most {unsigned_percent(worse_high)})"


def _judge_single(est: RatioEstimate, crit: Criteria) -> CaseResult:
    """One value on a side: only the bare ratio against the threshold, without an interval, said so."""
    rel = est.ratio - 1
    head = f"single values, no interval: NEW/OLD = {est.ratio:.4f} ({signed_percent(rel)})"
    if not math.isfinite(rel):
        return CaseResult(est, None, Verdict.UNDECIDED, head)
    if abs(rel) <= crit.same_band:
        verdict, why = Verdict.SAME, f"{head}, inside the +/-{unsigned_percent(crit.same_band)} threshold"
    else:
        verdict, better = _direction(rel > 0, crit)
        why = f"{head}: NEW is {better}"
    limit, worse = crit.fail_on_regression, (-rel if crit.higher_is_better else rel)
    if limit is None:
        return CaseResult(est, None, verdict, why)
    if worse > limit:
        return CaseResult(est, None, verdict, why, True,
                          f"regression: NEW is worse by {unsigned_percent(worse)}, beyond {unsigned_percent(limit)}")
    return CaseResult(est, None, verdict, why, False, f"no regression beyond {unsigned_percent(limit)}")


def _names(a: dict, b: dict) -> tuple[str, ...]:
    return tuple(" / ".join(k) for k in a if k not in b)


def _compare_status(old_df, new_df, key: list[str]) -> FileComparison:
    """Parity: a case that passed in OLD and does not pass in NEW is a regression."""
    def statuses(df):
        return {tuple(str(r[k]) for k in key): str(r.get("status", "")) for r in df.to_dict("records")}

    old, new = statuses(old_df), statuses(new_df)
    deltas = []
    for k in [k for k in old if k in new]:
        change = f"{old[k]} -> {new[k]}" if old[k] != new[k] else old[k]
        deltas.append(CaseDelta(k, old[k], new[k], None, change, old[k] == "PASS" and new[k] != "PASS"))
    return FileComparison("parity", "status", tuple(deltas), _names(old, new), _names(new, old))
