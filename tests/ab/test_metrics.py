"""--metric and --same parsing and reading: names, directions, key groups, the only-group rule."""
from __future__ import annotations

import pytest

from strata_bench.ab.metrics import (OutputMissing, metric_label, output_text, parse_output_spec, parse_output_specs,
                                     read_metrics, read_same)
from strata_bench.errors import InputError

OUT = """prefill 128 tokens in 12.5 ms
prefill 512 tokens in 50.0 ms
prefill 128 tokens in 12.25 ms
logits sha256 128: aa
decode 64 tokens in 640 ms: 100.0 tokens/s
"""


def test_name_direction_and_the_old_single_regex_form():
    spec = parse_output_spec(r"decode:higher=(?P<value>[0-9.]+) tokens/s", "--metric", "metric")
    assert (spec.name, spec.higher_is_better, spec.group) == ("decode", True, "value")
    named = parse_output_spec(r"prefill=prefill \d+ tokens in ([0-9.]+) ms", "--metric", "metric")
    assert (named.name, named.higher_is_better, named.group) == ("prefill", None, 1)
    # `v=(` opens a group right after NAME=: the whole text is the regex (the single-metric form).
    old = parse_output_spec(r"v=(?P<value>\d+)", "--metric", "metric")
    assert old.name == "metric" and old.regex.pattern == r"v=(?P<value>\d+)"


def test_a_unit_after_the_name_or_the_direction():
    got = [(s.name, s.higher_is_better, s.unit, s.regex.pattern) for s in parse_output_specs(
        [r"prefill:ms=prefill (?P<key>\d+) tokens in (?P<value>[0-9.]+) ms", r"decode:higher:tok/s=([0-9.]+) tok",
         r"tok/s: ([0-9.]+)"], "--metric", "metric")]
    assert got == [("prefill", None, "ms", r"prefill (?P<key>\d+) tokens in (?P<value>[0-9.]+) ms"),
                   ("decode", True, "tok/s", r"([0-9.]+) tok"), ("metric3", None, None, r"tok/s: ([0-9.]+)")]


def test_key_group_gives_one_metric_per_key_last_match_wins():
    specs = parse_output_specs([r"prefill=prefill (?P<key>\d+) tokens in (?P<value>[0-9.]+) ms",
                                r"tps:higher=([0-9.]+) tokens/s"], "--metric", "metric")
    assert read_metrics(specs, OUT) == {"prefill[128]": 12.25, "prefill[512]": 50.0, "tps": 100.0}


def test_missing_metric_and_bad_specs():
    spec = parse_output_specs([r"nothing (\d+)"], "--metric", "metric")
    with pytest.raises(OutputMissing, match="metric not found"):
        read_metrics(spec, OUT)
    with pytest.raises(InputError, match="has 2 groups"):
        parse_output_spec(r"a(\d)(\d)", "--metric", "metric")
    with pytest.raises(InputError, match="has no group"):
        parse_output_spec(r"prefill", "--metric", "metric")
    with pytest.raises(InputError, match="'x' is given twice"):
        parse_output_specs([r"x=a(\d)", r"x=b(\d)"], "--metric", "metric")
    with pytest.raises(InputError, match="--same is not a valid regex"):
        parse_output_spec(r"(", "--same", "output", need_group=False)


def test_same_captures_whole_match_group_or_key_and_marks_missing():
    specs = parse_output_specs([r"logits=logits sha256 (?P<key>\d+): (?P<value>\w+)", r"decode \d+ tokens",
                                r"absent=never (\w+)"], "--same", "output", need_group=False)
    assert read_same(specs, OUT) == {"logits[128]": "aa", "output2": "decode 64 tokens", "absent": None}


@pytest.mark.parametrize("text, label", [
    (r"prefill:ms=prefill (?P<key>\d+) tokens in (?P<value>[0-9.]+) ms", "prefill"),  # a name is the label
    (r"prefill (?P<key>\d+) tokens in (?P<value>[0-9.]+) ms", "prefill ... tokens in ... ms"),
    (r"decode \d+ tokens in [0-9.]+ ms: ([0-9.]+) tokens/s", "decode ... tokens in ... ms: ... tokens/s"),
    (r"tok/s: ([0-9.]+)", "tok/s: ..."),
    (r"v=(?P<value>\d+)", "v=..."),
    (r"a\.b=([0-9]{1,3}(?:\.[0-9]+)?) x", "a.b=... x"),  # an escaped dot is literal; {1,3} a quantifier
    (r"x \((?P<value>[^)]+)\) y", "x (...) y"),  # a ')' inside a class does not close the group
    (r"\d+ \d+ (\d+)", "metric"),  # nothing literal: the default name
    (r"throughput of the whole model end to end: ([0-9.]+) tokens per second", "throughput of the whole model end to end: ..."),
])
def test_one_metric_label_is_its_name_or_its_literal_text_in_48_characters(text, label):
    assert metric_label(text, parse_output_spec(text, "--metric", "metric")) == label


def test_a_key_that_is_not_utf8_text_is_refused_not_merged():
    # Decoded with "replace", keys b'\xff' and b'\xfe' both named the entry 'm[\ufffd]'.
    specs = parse_output_specs([r"m=k(?P<key>.)=(?P<value>\d)"], "--metric", "metric")
    with pytest.raises(OutputMissing) as err:
        read_metrics(specs, output_text(b"k\xff=1\nk\xfe=2\n"))
    assert str(err.value) == "m: the key group b'\\xff' is not UTF-8 text"


def test_a_figure_that_is_not_utf8_is_named_by_its_bytes():
    specs = parse_output_specs([r"m=v=(\S+)"], "--metric", "metric")
    with pytest.raises(OutputMissing) as err:
        read_metrics(specs, output_text(b"v=1\xff\n"))
    assert str(err.value) == "metric group 1 is not a number: b'1\\xff'"
