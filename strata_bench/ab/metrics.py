"""What a command run's output is read for: figures (--metric) and text that must not change (--same).

Both options take `[NAME[:higher|:lower][:UNIT]=]REGEX`. A leading `NAME=` names the metric unless
what follows it opens a group: `v=(?P<value>\\d+)` is one regex (the old single-metric form), while
`decode=decode .* (?P<value>[0-9.]+) tok/s` is the metric `decode`. `NAME:higher=` and `NAME:lower=`
are always a name, with the direction of that metric, and so is `NAME:UNIT=` (`prefill:ms=`,
`decode:higher:tok/s=`): the unit the figure is printed in, shown beside it (and converted by --unit
where both are time units).

The figure (or the identity text) is the group `value`, else the only group; for --same a regex
without a group captures the whole match. A group `key` yields one entry per distinct key,
named `NAME[key]` (`prefill[512]`); the last match of each key counts, because a program that
prints progress repeats its figure.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from strata_bench.errors import InputError

VALUE_GROUP, KEY_GROUP = "value", "key"
_NAMED = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?::(?P<dir>higher|lower))?"
                    r"(?::(?P<unit>[^\s=:()\[\]{}]+))?=(?P<rest>.*)$", re.DOTALL)


class OutputMissing(Exception):
    """A metric regex matched nothing, or its figure is not a number (the run is a failed run)."""


@dataclass(frozen=True)
class OutputSpec:
    """One --metric or --same: its name, regex, and (for a metric) whether higher is better."""

    name: str
    regex: re.Pattern[str]
    higher_is_better: bool | None = None  # None: the global --higher-is-better
    group: str | int = VALUE_GROUP  # the group holding the figure or text (0: the whole match)
    unit: str | None = None  # the unit the figure is printed in (None: --unit)

    @property
    def keyed(self) -> bool:
        return KEY_GROUP in self.regex.groupindex

    def describe(self) -> dict[str, Any]:
        body = {"name": self.name, "pattern": self.regex.pattern, "higher_is_better": self.higher_is_better}
        return {**body, "unit": self.unit} if self.unit else body


def parse_output_spec(text: str, option: str, default_name: str, need_group: bool = True) -> OutputSpec:
    """`[NAME[:higher|:lower][:UNIT]=]REGEX` -> OutputSpec; InputError names the option and the value."""
    name, direction, unit, pattern = default_name, None, None, text
    m = _NAMED.match(text)
    if m and (m.group("dir") or m.group("unit") or not m.group("rest").startswith("(")):
        name, unit, pattern = m.group("name"), m.group("unit"), m.group("rest")
        direction = None if m.group("dir") is None else m.group("dir") == "higher"
    try:
        regex = re.compile(pattern, re.MULTILINE)
    except (re.error, OverflowError) as exc:  # OverflowError: a repetition count past what re can hold
        raise InputError(f"{option} is not a valid regex ({exc}): {text!r}") from None
    return OutputSpec(name, regex, direction, _figure_group(regex, option, text, need_group), unit)


def _figure_group(regex: re.Pattern[str], option: str, text: str, need_group: bool) -> str | int:
    if VALUE_GROUP in regex.groupindex:
        return VALUE_GROUP
    others = [i for i in range(1, regex.groups + 1) if regex.groupindex.get(KEY_GROUP) != i]
    if len(others) == 1:
        return others[0]
    if not others and not need_group:
        return 0
    what = "no group" if not others else f"{len(others)} groups"
    raise InputError(f"{option} must have a group (?P<{VALUE_GROUP}>...) or exactly one group besides "
                     f"(?P<{KEY_GROUP}>...); it has {what}: {text!r}")


def parse_output_specs(texts: Sequence[str], option: str, stem: str, need_group: bool = True) -> tuple[OutputSpec, ...]:
    """Every --metric (or --same), named `stem`, `stem2`, ... where unnamed; names must be distinct."""
    specs = tuple(parse_output_spec(t, option, stem if i == 0 else f"{stem}{i + 1}", need_group)
                  for i, t in enumerate(texts))
    names = [s.name for s in specs]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise InputError(f"{option} names must be distinct; {dup!r} is given twice")
    return specs


def metric_label(text: str, spec: OutputSpec, limit: int = 48) -> str:
    """What a table calls one --metric: its NAME where the text gives one, else its regex shortened to the
    literal text it matches (`prefill \\d+ tokens in (?P<value>[0-9.]+) ms` -> `prefill ... tokens in ... ms`):
    the whole regex was the label once."""
    if spec.regex.pattern != text:
        return spec.name
    label = re.sub(r"(\.\.\.\s*)+\.\.\.", "...", "".join(_literal_parts(text))).strip()
    if not label.strip(". "):  # nothing literal: `(?P<value>\d+)`
        return spec.name
    if len(label) <= limit:
        return label
    short = label[:limit - 4].rsplit(" ", 1)[0]  # cut at a word
    return short if short.endswith("...") else short + " ..."


def _literal_parts(pattern: str) -> list[str]:
    """The pattern's literal characters; each group, class, escape class or wildcard as one "..." (quantifiers
    dropped)."""
    parts, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1:i + 2]
            parts.append("..." if nxt.isalnum() else nxt)  # \d, \s, \b... a class; \. an escaped literal
            i += 2
        elif c in "([{":
            i = _class_end(pattern, i) if c == "[" else _group_end(pattern, i)
            parts.append("" if c == "{" else "...")  # {m,n} is a quantifier
        else:
            parts.append("..." if c == "." else "" if c in "*+?^$" else c)
            i += 1
    return parts


def _class_end(pattern: str, start: int) -> int:
    """The index after the `]` that closes the class at pattern[start] (a `]` first in it is a member)."""
    i = start + 1 + (pattern[start + 1:start + 2] == "^")
    i += pattern[i:i + 1] == "]"
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


def _group_end(pattern: str, start: int) -> int:
    """The index after the bracket that closes the group (or quantifier) at pattern[start]."""
    close, depth, i = {"(": ")", "{": "}"}[pattern[start]], 0, start
    while i < len(pattern):
        c = pattern[i]
        if c == "[":
            i = _class_end(pattern, i)
            continue
        depth += (c == pattern[start]) - (c == close)
        i += 2 if c == "\\" else 1
        if depth == 0:
            return i
    return i


def output_text(raw: bytes) -> str:
    """A run's output as --metric and --same read it: a byte that is not UTF-8 becomes a lone surrogate
    (surrogateescape), so outputs that differ in any byte read differently and a capture gives its bytes
    back exactly (decoded with "replace", b'h=\\xff' and b'h=\\xfe' both read 'h=\\ufffd': identical)."""
    return raw.decode("utf-8", "surrogateescape")


def output_bytes(text: str) -> bytes:
    """The bytes of a capture of output_text: what identity compares."""
    return text.encode("utf-8", "surrogateescape")


def printable(text: str) -> str:
    """A capture for a display or a file: its bytes that are not UTF-8 shown as \\xNN."""
    return output_bytes(text).decode("utf-8", "backslashreplace")


def quoted(text: str) -> str:
    """A capture in a message: its repr, or its bytes' (b'h=\\xff') where it is not UTF-8 text."""
    return repr(text) if printable(text) == text else repr(output_bytes(text))


def captures(spec: OutputSpec, text: str) -> dict[str, str]:
    """Entry name -> captured text of the last match per key (one entry when there is no key)."""
    out: dict[str, str] = {}
    for m in spec.regex.finditer(text):
        name = f"{spec.name}[{_key(spec, m.group(KEY_GROUP))}]" if spec.keyed else spec.name
        out.pop(name, None)  # keep first-appearance order of keys, last value
        out[name] = m.group(spec.group) or ""
    return out


def _key(spec: OutputSpec, key: str) -> str:
    """A key names an entry in every table: one that is not UTF-8 text is refused, not shown decoded (two
    such keys would name one entry)."""
    if printable(key) != key:
        raise OutputMissing(f"{spec.name}: the key group {quoted(key)} is not UTF-8 text")
    return key


def read_metrics(specs: Sequence[OutputSpec], text: str) -> dict[str, float]:
    """Every metric's figures; OutputMissing when a regex matches nothing or a figure is no number."""
    values: dict[str, float] = {}
    for spec in specs:
        found = captures(spec, text)
        if not found:
            raise OutputMissing(f"metric not found: {spec.regex.pattern!r} does not match the output")
        for name, raw in found.items():
            try:
                values[name] = float(raw)
            except ValueError:
                raise OutputMissing(f"metric group {spec.group!r} is not a number: {quoted(raw)}") from None
    return values


def read_same(specs: Sequence[OutputSpec], text: str) -> dict[str, str | None]:
    """Every --same capture; a regex that matches nothing is recorded as None (it differs from any text)."""
    out: dict[str, str | None] = {}
    for spec in specs:
        found = captures(spec, text)
        out.update(found if found else {spec.name: None})
    return out


def base_name(entry: str) -> str:
    """`prefill[512]` -> `prefill`."""
    return entry.split("[", 1)[0]


def direction_of(entry: str, directions: Mapping[str, bool], default: bool) -> bool:
    """Whether higher is better for a metric entry, by its spec's name."""
    return directions.get(base_name(entry), default)
