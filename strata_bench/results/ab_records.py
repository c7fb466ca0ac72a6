"""The types an A/B records file must hold before it is judged again (report, compare, plot).

A records file may have been edited, cut or written by another tool: every field the judging reads
is checked here first, so a wrong type is one line naming the record and the field (InputError, exit
2), never a TypeError deep inside the statistics.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

from strata_bench.errors import InputError

ORDERS = ("abba", "ab", "random")  # the run orders an A/B plan may record
SECONDS_PER = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}  # the time units --unit converts between
MAX_PAIRS = 100_000  # a schedule is built before the first run: 4e9 pairs took 930 MB before anything ran
# Measured pairs (pairs, then until_decided's) index from 0, warm-ups are pair -1; two runs a pair, warm-ups too.
MAX_PAIR = 2 * MAX_PAIRS
MAX_RUN = 2 * (MAX_PAIR + MAX_PAIRS)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v: Any) -> bool:
    return (_int(v) or isinstance(v, float)) and math.isfinite(v)


def _index(low: int, high: int) -> Callable[[Any], bool]:
    """A run's place in the schedule: judging builds the schedule up to it (a pair of 10**30 never ended)."""
    return lambda v: _int(v) and low <= v <= high


def _count(v: Any) -> bool:
    """A pair count a schedule can be built for (a file claiming 10**12 pairs would never finish judging)."""
    return _int(v) and 0 <= v <= MAX_PAIRS


def _str(v: Any) -> bool:
    return isinstance(v, str)


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or check(v)


def _pairs(first: Callable[[Any], bool], second: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, list) and all(isinstance(p, list) and len(p) == 2 and first(p[0]) and second(p[1])
                                                 for p in v)


def _mapping(value: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, dict) and all(_str(k) and value(x) for k, x in v.items())


def _list_of(item: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, list) and all(item(x) for x in v)


def _bool(v: Any) -> bool:
    return isinstance(v, bool)


_COUNT = (_count, f"an integer from 0 to {MAX_PAIRS}")
_NAMES = (_list_of(_str), "a list of names")
# field -> (check, what it must be); a field left out is allowed (older files), a present one is checked
_CRITERIA = {"higher_is_better": (_bool, "true or false"), "same_band": (_number, "a number"),
             "fail_on_regression": (_optional(_number), "a number or null"), "confidence": (_number, "a number"),
             "seed": (_int, "an integer"), "n_resamples": (_int, "an integer")}
_PLAN = {"case": (_str, "a string"), "order": (lambda v: v in ORDERS, " or ".join(map(repr, ORDERS))),
         "pairs": _COUNT, "warmup": _COUNT,
         "seed": (_int, "an integer"), "max_failures": (_int, "an integer"),
         "unit": (_str, "a string"), "metric": (_str, "a string"),
         "directions": (_pairs(_str, _bool), "a list of [name, true/false]"),
         "params": (_pairs(_str, _str), "a list of [name, value]"), "units": (_pairs(_str, _str),
                                                                               "a list of [name, unit]"),
         "until_decided": _COUNT, "allow_missing": (_bool, "true or false"),
         "value_unit": (_optional(_str), "a string or null"), "criteria": (_mapping(lambda v: True), "an object"),
         "arms": (_mapping(_mapping(lambda v: True)), "an object of objects")}
_RUN = {"case": (_str, "a string"), "arm": (lambda v: v in ("A", "B"), '"A" or "B"'),
        "pair": (_index(-1, MAX_PAIR), f"an integer from -1 to {MAX_PAIR}"),
        "position": (_index(0, MAX_RUN), f"an integer from 0 to {MAX_RUN}"),
        "run_index": (_index(0, MAX_RUN), f"an integer from 0 to {MAX_RUN}"), "warmup": (_bool, "true or false"),
        "value": (_optional(_number), "a finite number or null"), "failure": (_optional(_str), "a string or null"),
        "started": (_str, "a string"), "ended": (_str, "a string"),
        "metrics": (_mapping(_number), "an object of finite numbers"),
        "same": (_mapping(_optional(_str)), "an object of strings"), "metric_order": _NAMES, "same_order": _NAMES,
        "output_tail": (_optional(_str), "a string"),
        "server_tail": (_optional(_str), "a string"), "error_line": (_optional(_str), "a string"),
        "cpu_user_s": (_number, "a finite number"), "cpu_system_s": (_number, "a finite number")}
_OTHER = {"case": (_str, "a string"), "pairs": _COUNT, "reason": (_str, "a string"),
          "error": (_str, "a string")}
_REQUIRED = {"run": ("arm", "pair", "run_index")}


def check_records(records: Sequence[Mapping[str, Any]], where: str) -> None:
    """InputError naming `where`, the record and the field for the first field of a wrong type."""
    for n, body in enumerate(records, 1):
        kind = body.get("record")
        fields = {"plan": _PLAN, "run": _RUN}.get(kind, _OTHER)
        missing = [k for k in _REQUIRED.get(kind, ()) if k not in body]
        if missing:
            raise InputError(f"{where}: record {n} ({kind}) has no {missing[0]!r}")
        _check_fields(body, fields, f"{where}: record {n} ({kind})")
        if kind == "plan" and isinstance(body.get("criteria"), dict):
            _check_fields(body["criteria"], _CRITERIA, f"{where}: record {n} (plan) criteria")


def _check_fields(body: Mapping[str, Any], fields, what: str) -> None:
    for key, (check, expected) in fields.items():
        if key in body and not check(body[key]):
            raise InputError(f"{what}: {key!r} is {_show(body[key])}, not {expected}")


def _show(value: Any) -> str:
    import json

    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."
