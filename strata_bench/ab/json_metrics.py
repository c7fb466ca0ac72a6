"""Keyed metrics read from JSON objects in a run's output (`ab --metric-json`), such as `llama-bench -o json`.

A spec is `[NAME[:higher|:lower][:UNIT]=]FIELD[@KEY]`:
  FIELD  the number each object carries (`avg_ts`);
  KEY    what names an object's entry: `llama-bench` (its own test name: `pp512`, `tg128`, `pp512+tg128`,
         ` @ d512` added at a depth, as llama-bench's markdown prints it), or a template over the object's
         fields (`pp{n_prompt}`); without KEY, one entry, the last object that has FIELD.
`--metric-json llama-bench` is `avg_ts:higher:t/s=avg_ts@llama-bench`: one metric per test, its
tokens/s, higher is better. A FIELD whose value is an array of numbers gives their median:
`--metric-json llama-bench-median` is `median_ts:higher:t/s=samples_ts@llama-bench`, the median of a test's
repetitions. Why a median: on an H100 a 270M model's pp512 and pp1024 repetitions ran 14-19% slower in the
first three of ten than in the last three, in every process (scripts/engine_noise.py, issue 36), so the mean
carries that ramp and its spread from process to process; the median of ten does not.

The objects are found wherever they are in the output: llama-bench's JSON array (`-o json`) or one object
a line (`-o jsonl`), with the engine's log lines (stderr, merged) before, after or between them. Each
entry is named `NAME[key]` (`avg_ts[pp512]`), so every --metric rule (a verdict per entry, the last
object of a key counts) applies unchanged.

A spec answers the compiled-pattern protocol that `strata_bench.ab.metrics.captures` reads
(`finditer`, `groupindex`, `pattern`), so it travels in `CommandSpec.metrics` beside the regex metrics.
"""
from __future__ import annotations

import json
import re
import statistics
import string
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from strata_bench.ab.metrics import KEY_GROUP, VALUE_GROUP, OutputSpec
from strata_bench.errors import InputError

LLAMA_BENCH = "llama-bench"
# The numbers llama-bench prints for every test (tools/llama-bench/llama-bench.cpp's `test::get_fields`):
# its direction and unit. Its other fields are the test's settings and provenance, not figures.
LLAMA_BENCH_FIGURES = {"avg_ts": (True, "t/s"), "stddev_ts": (None, "t/s"), "avg_ns": (False, "ns"),
                       "stddev_ns": (None, "ns"), "samples_ts": (True, "t/s"), "samples_ns": (False, "ns")}
PRESETS = {LLAMA_BENCH: "avg_ts:higher:t/s=avg_ts@llama-bench",
           f"{LLAMA_BENCH}-median": "median_ts:higher:t/s=samples_ts@llama-bench"}
_SPEC = re.compile(r"^(?:(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?::(?P<dir>higher|lower))?(?::(?P<unit>[^\s=:@]+))?=)?"
                   r"(?P<field>[A-Za-z_][A-Za-z0-9_.-]*)(?:@(?P<key>.+))?$")


def llama_bench_test(obj: dict[str, Any]) -> str:
    """llama-bench's name of a test: pp512, tg128, pp512+tg128, and ' @ d512' at a depth."""
    n_prompt, n_gen, depth = (int(obj.get(k) or 0) for k in ("n_prompt", "n_gen", "n_depth"))
    if n_prompt > 0 and n_gen == 0:
        name = f"pp{n_prompt}"
    elif n_gen > 0 and n_prompt == 0:
        name = f"tg{n_gen}"
    else:
        name = f"pp{n_prompt}+tg{n_gen}"
    return f"{name} @ d{depth}" if depth > 0 else name


def json_objects(text: str | bytes) -> Iterator[dict[str, Any]]:
    """Every top-level JSON object in `text`, in order; arrays of objects are entered, other text skipped."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    decoder = json.JSONDecoder()
    pos = 0
    while True:
        starts = [i for i in (text.find("{", pos), text.find("[", pos)) if i >= 0]
        if not starts:
            return
        start = min(starts)
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            pos = start + 1  # a log line's bracket, or an array broken by a log line: look inside it
            continue
        if isinstance(value, dict):
            yield value
        elif isinstance(value, list):
            yield from (v for v in value if isinstance(v, dict))
        pos = end


def _figure(value: Any) -> Any:
    """The figure a field gives: a number (or its text) as it is, a non-empty array of numbers its median,
    else None."""
    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    if isinstance(value, list):
        return statistics.median(value) if value and all(number(v) for v in value) else None
    return value if number(value) or isinstance(value, str) else None


class _Found:
    """One object's entry, as a regex match object answers `group`."""

    def __init__(self, key: str, value: str) -> None:
        self._groups = {KEY_GROUP: key, VALUE_GROUP: value}

    def group(self, name: str | int = 0) -> str:
        return self._groups[name]


@dataclass(frozen=True)
class JsonPattern:
    """FIELD per object, named by KEY: the pattern protocol (`finditer`, `groupindex`, `pattern`)."""

    field: str
    key: str | None  # LLAMA_BENCH, a template over the object's fields, or None

    @property
    def pattern(self) -> str:
        return f"JSON field {self.field!r}" + (f" per {self.key!r}" if self.key else "")

    @property
    def groupindex(self) -> dict[str, int]:
        return {KEY_GROUP: 1, VALUE_GROUP: 2} if self.key else {VALUE_GROUP: 1}

    @property
    def groups(self) -> int:
        return len(self.groupindex)

    def finditer(self, text: str | bytes) -> Iterator[_Found]:
        for obj in json_objects(text):
            value = _figure(obj.get(self.field))
            if value is None:
                continue  # the field is absent (or not a figure) in this object
            yield _Found(self._key_of(obj), str(value))

    def _key_of(self, obj: dict[str, Any]) -> str:
        if self.key is None:
            return ""
        if self.key == LLAMA_BENCH:
            return llama_bench_test(obj)
        try:
            return self.key.format_map(obj)
        except (KeyError, IndexError, ValueError):
            return self.key  # a field the template names is missing: every such object shares one key


def parse_json_metric(text: str, commands: Sequence[str] = ()) -> OutputSpec:
    """One --metric-json (a preset name or a spec) -> the OutputSpec that reads it; InputError for a bad
    spec, or for a figure the engine never prints (llama-bench: a field it has no number for, or a command
    without `-o json`/`-o jsonl`)."""
    spec = PRESETS.get(text, text)
    m = _SPEC.match(spec)
    if not m:
        raise InputError(f"--metric-json must be {' or '.join(PRESETS)} or "
                         f"[NAME[:higher|:lower][:UNIT]=]FIELD[@KEY], got {text!r}")
    field, key = m.group("field"), m.group("key")
    direction = None if m.group("dir") is None else m.group("dir") == "higher"
    unit = m.group("unit")
    if key == LLAMA_BENCH:
        if field not in LLAMA_BENCH_FIGURES:
            raise InputError(f"--metric-json: llama-bench never prints a figure {field!r} (its figures: "
                             f"{', '.join(LLAMA_BENCH_FIGURES)}): {text!r}")
        _require_json_output(commands, text)
        default_direction, default_unit = LLAMA_BENCH_FIGURES[field]
        direction = default_direction if direction is None else direction
        unit = unit or default_unit
    elif key is not None:
        _check_template(key, text)
    name = m.group("name") or field
    return OutputSpec(name, JsonPattern(field, key), direction, VALUE_GROUP, unit)  # type: ignore[arg-type]


def parse_json_metrics(texts: Sequence[str], commands: Sequence[str] = (), taken: Sequence[str] = ()
                       ) -> tuple[OutputSpec, ...]:
    """Every --metric-json; a name given twice, or already a --metric's (`taken`), is an InputError."""
    specs = tuple(parse_json_metric(t, commands) for t in texts)
    names = list(taken) + [s.name for s in specs]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise InputError(f"--metric and --metric-json names must be distinct; {dup!r} is given twice")
    return specs


def _check_template(key: str, text: str) -> None:
    try:
        names = [f for _, f, _, _ in string.Formatter().parse(key) if f is not None]
    except ValueError as exc:
        raise InputError(f"--metric-json KEY is not a template like pp{{n_prompt}} ({exc}): {text!r}") from None
    if not names or any(not n.isidentifier() for n in names):
        raise InputError(f"--metric-json KEY must name fields as {{field}} (or be llama-bench): {text!r}")


_JSON_OUTPUT = re.compile(r"(?:^|\s)(?:-o|--output|-oe|--output-err)(?:\s+|=)(?P<fmt>\S+)")


def _require_json_output(commands: Sequence[str], text: str) -> None:
    """llama-bench prints markdown unless told `-o json` (or jsonl): the metric would never appear."""
    for command in commands:
        if command and LLAMA_BENCH in command:
            formats = [m.group("fmt").strip("'\"") for m in _JSON_OUTPUT.finditer(command)]
            if not any(f in ("json", "jsonl") for f in formats):
                raise InputError(f"--metric-json {text}: llama-bench prints no JSON without -o json "
                                 f"(or -o jsonl); the command is {command!r}")
