"""The A/B plan: order, pairs, warm-up, seed, failure budget and criteria; the schedule it implies.

Orders (pairs are numbered 0..N-1; warm-up pairs -K..-1 run first and are recorded with warmup=true):
  abba    pair p runs A then B when p is even, B then A when p is odd: A B | B A | A B | B A ...
          so a linear drift adds the same amount to each arm over every two pairs. Warm-up pairs
          follow the same rule (pair -1 runs B A), so the alternation is unbroken at the start.
  ab      every pair runs A then B.
  random  each pair's order is a coin flip from random.Random(seed); the seed is recorded.
"""
from __future__ import annotations

import math
import random
import secrets
from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping

from strata_bench.errors import InputError
# The plan's bounds and time units, declared with its record (results/ab_records.py).
from strata_bench.results.ab_records import MAX_PAIRS, ORDERS, SECONDS_PER
from strata_bench.stats.criteria import Criteria



@dataclass(frozen=True)
class Slot:
    """One scheduled run."""

    pair: int  # -K..-1 for warm-up pairs, 0..N-1 for measured pairs
    position: int  # 0: first run of its pair, 1: second
    arm: str

    @property
    def warmup(self) -> bool:
        return self.pair < 0


@dataclass(frozen=True)
class Plan:
    """How to run and judge an A/B comparison; `max_failures` is a count of runs."""

    order: str = "abba"
    pairs: int = 10
    warmup: int = 1
    seed: int = 0
    max_failures: int = 5
    criteria: Criteria = Criteria()
    unit: str = "s"
    metric: str = "wall time"
    directions: tuple[tuple[str, bool], ...] = ()  # (metric name, higher is better) where given per metric
    params: tuple[tuple[str, str], ...] = ()  # this case's --param values
    until_decided: int = 0  # add pairs while the verdict is UNDECIDED, up to this many (0: never)
    allow_missing: bool = False  # an --same entry some arm, key or run never printed does not fail the check
    units: tuple[tuple[str, str], ...] = ()  # (metric name, the unit it is printed in) where given per metric
    value_unit: str | None = None  # the unit of a run's value without metrics (wall time: s); None: `unit`

    @property
    def total_runs(self) -> int:
        return 2 * (max(self.pairs, self.until_decided) + self.warmup)

    def higher_is_better(self, metric: str) -> bool:
        """Direction of one metric entry (`prefill[512]` looks up `prefill`)."""
        return dict(self.directions).get(metric.split("[", 1)[0], self.criteria.higher_is_better)

    def shown(self, metric: str | None = None) -> tuple[float, str]:
        """(factor, unit) a figure of `metric` (None: a run's value) is shown with: converted into `unit`
        (--unit) where both are time units, else in its own unit, else labelled `unit`."""
        own = self.value_unit if metric is None else dict(self.units).get(metric.split("[", 1)[0])
        if own is None:
            return 1.0, self.unit
        if own in SECONDS_PER and self.unit in SECONDS_PER:
            return SECONDS_PER[own] / SECONDS_PER[self.unit], self.unit
        return 1.0, own

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def make_plan(order: str = "abba", pairs: int = 10, warmup: int = 1, seed: int | None = None,
              max_failures: str | int | None = None, criteria: Criteria = Criteria(),
              unit: str = "s", metric: str = "wall time", directions=(), until_decided: int = 0,
              allow_missing: bool = False, units=(), value_unit: str | None = None) -> Plan:
    """Validate the settings; `max_failures` is a count ("3", 3) or a share of all runs ("25%")."""
    if order not in ORDERS:
        raise InputError(f"--order must be one of {', '.join(ORDERS)}, got {order!r}")
    for option, value, low in (("--pairs", pairs, 1), ("--warmup", warmup, 0), ("--until-decided", until_decided, 0)):
        if not low <= value <= MAX_PAIRS:
            raise InputError(f"{option} must be from {low} to {MAX_PAIRS}, got {value}")
    if until_decided and until_decided < pairs:
        raise InputError(f"--until-decided must be at least --pairs ({pairs}), got {until_decided}")
    seed = secrets.randbits(32) if seed is None else int(seed)
    total = 2 * (max(pairs, until_decided) + warmup)
    return Plan(order, pairs, warmup, seed, failure_budget(max_failures, total), criteria, unit, metric,
                tuple((str(n), bool(h)) for n, h in directions), (), int(until_decided), bool(allow_missing),
                tuple((str(n), str(u)) for n, u in units), value_unit)


def failure_budget(spec: str | int | None, total_runs: int) -> int:
    """Failed runs tolerated: default 25% of all runs (rounded down)."""
    spec = "25%" if spec is None else str(spec).strip()
    try:
        if spec.endswith("%"):
            share = float(spec[:-1]) / 100
            if not 0 <= share <= 1:
                raise ValueError
            return int(math.floor(share * total_runs + 1e-9))
        count = int(spec)
        if count < 0:
            raise ValueError
        return count
    except ValueError:
        raise InputError(f"--max-failures must be a count or a percentage like 25%, got {spec!r}") from None


def schedule(order: str, pairs: int, warmup: int = 0, seed: int = 0) -> list[Slot]:
    """Every run in execution order: warm-up pairs -warmup..-1, then pairs 0..pairs-1."""
    coin = random.Random(seed)
    slots: list[Slot] = []
    for pair in range(-warmup, pairs):
        if order == "abba":
            first = "A" if pair % 2 == 0 else "B"
        elif order == "ab":
            first = "A"
        else:
            first = coin.choice("AB")
        second = "B" if first == "A" else "A"
        slots += [Slot(pair, 0, first), Slot(pair, 1, second)]
    return slots


def plan_from_json(body: Mapping[str, Any]) -> Plan:
    """The Plan a `plan` record describes (unknown keys ignored, so older records still load)."""
    fields = {k: body[k] for k in ("order", "pairs", "warmup", "seed", "max_failures", "unit", "metric",
                                   "until_decided", "allow_missing", "value_unit") if k in body}
    fields.update({k: tuple((str(n), v) for n, v in body[k]) for k in ("directions", "params", "units")
                   if body.get(k)})
    criteria = Criteria(**{k: v for k, v in dict(body.get("criteria", {})).items()
                           if k in Criteria.__dataclass_fields__})
    return replace(Plan(**fields), criteria=criteria)
