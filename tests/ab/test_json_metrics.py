"""--metric-json: keyed figures from JSON objects in a run's output (llama-bench -o json / jsonl), the
llama-bench preset, and the bad specs and commands refused before anything runs (exit 2)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from strata_bench.ab.json_metrics import json_objects, llama_bench_test, parse_json_metric, parse_json_metrics
from strata_bench.ab.metrics import OutputMissing, read_metrics
from strata_bench.errors import InputError

SAMPLE = (Path(__file__).resolve().parents[1] / "engine" / "data" / "llama-bench-sample.txt").read_text()
CMD = "llama-bench -m m.gguf -p 64,128,256,512,1024 -n 128 -o json"


def test_llama_bench_names_tests_as_its_markdown_does():
    assert [llama_bench_test(o) for o in ({"n_prompt": 512, "n_gen": 0}, {"n_prompt": 0, "n_gen": 128},
                                          {"n_prompt": 512, "n_gen": 128}, {"n_prompt": 512, "n_gen": 0, "n_depth": 512},
                                          {"n_prompt": 0, "n_gen": 128, "n_depth": 4096})] == [
        "pp512", "tg128", "pp512+tg128", "pp512 @ d512", "tg128 @ d4096"]


def test_every_object_of_the_recorded_sample_is_found_around_log_lines():
    objects = list(json_objects(SAMPLE))
    assert [(o["n_prompt"], o["n_gen"], o["n_depth"]) for o in objects] == [
        (64, 0, 0), (128, 0, 0), (256, 0, 0), (512, 0, 0), (1024, 0, 0), (0, 128, 0), (512, 0, 512)]


def test_the_llama_bench_preset_gives_one_tokens_per_second_metric_per_test():
    spec = parse_json_metric("llama-bench", [CMD])
    assert (spec.name, spec.higher_is_better, spec.unit, spec.keyed) == ("avg_ts", True, "t/s", True)
    assert spec.describe() == {"name": "avg_ts", "pattern": "JSON field 'avg_ts' per 'llama-bench'",
                               "higher_is_better": True, "unit": "t/s"}
    assert read_metrics([spec], SAMPLE) == {
        "avg_ts[pp64]": 21873.402113, "avg_ts[pp128]": 38120.55678, "avg_ts[pp256]": 61544.91301,
        "avg_ts[pp512]": 88233.017744, "avg_ts[pp1024]": 101947.38512, "avg_ts[tg128]": 612.774431,
        "avg_ts[pp512 @ d512]": 80211.664001}


def test_the_median_preset_reads_each_tests_repetitions():
    spec = parse_json_metric("llama-bench-median", [CMD])
    assert (spec.name, spec.higher_is_better, spec.unit) == ("median_ts", True, "t/s")
    got = read_metrics([spec], SAMPLE)
    assert got["median_ts[pp64]"] == 21884.34  # of 21829.66, 21895.28, 21884.34, 21862.47, 21895.28
    assert len(got) == 7


def test_an_array_field_gives_its_median_and_a_ramp_leaves_it():
    ramp = json.dumps({"n_prompt": 512, "n_gen": 0, "samples_ts": [80.0, 90.0, 100.0, 100.0, 101.0, 100.0],
                       "avg_ts": 95.1667})
    spec = parse_json_metric("median_ts:higher=samples_ts@llama-bench", [CMD])
    assert read_metrics([spec], ramp) == {"median_ts[pp512]": 100.0}
    mixed = json.dumps({"n_prompt": 512, "n_gen": 0, "samples_ts": [80.0, "fast"]})
    with pytest.raises(OutputMissing):
        read_metrics([spec], mixed)  # not an array of numbers: no figure, a missing metric


def test_jsonl_templates_unkeyed_fields_and_time_figures():
    lines = "\n".join(json.dumps(o) for o in json_objects(SAMPLE)) + "\nllama_perf: done\n"
    ns = parse_json_metric("avg_ns@pp{n_prompt}/tg{n_gen}", [CMD.replace("json", "jsonl")])
    assert (ns.name, ns.higher_is_better, ns.unit) == ("avg_ns", None, None)
    got = read_metrics([ns], lines)
    assert got["avg_ns[pp0/tg128]"] == next(o["avg_ns"] for o in json_objects(SAMPLE) if o["n_gen"])
    assert len(got) == 6  # pp512 at depth 0 and at depth 512 share the template's key: the last counts
    bench_ns = parse_json_metric("time:lower:ms=avg_ns@llama-bench", [CMD])
    assert (bench_ns.name, bench_ns.higher_is_better, bench_ns.unit) == ("time", False, "ms")
    last = parse_json_metric("ts=avg_ts")
    assert read_metrics([last], SAMPLE) == {"ts": 80211.664001}


def test_a_run_that_printed_no_such_object_fails_as_a_missing_metric():
    with pytest.raises(OutputMissing) as exc:
        read_metrics([parse_json_metric("llama-bench", [CMD])], "| model | t/s |\n| gemma3 | 1.0 |\n")
    assert str(exc.value) == "metric not found: \"JSON field 'avg_ts' per 'llama-bench'\" does not match the output"


@pytest.mark.parametrize("spec, commands, message", [
    ("avg_tps@llama-bench", [CMD], "--metric-json: llama-bench never prints a figure 'avg_tps' (its figures: "
                                   "avg_ts, stddev_ts, avg_ns, stddev_ns, samples_ts, samples_ns): "
                                   "'avg_tps@llama-bench'"),
    ("llama-bench", ["./bin/llama-bench -m m.gguf -p 512"], "--metric-json llama-bench: llama-bench prints no JSON "
                                                            "without -o json (or -o jsonl); the command is "
                                                            "'./bin/llama-bench -m m.gguf -p 512'"),
    ("llama-bench", ["llama-bench -m m.gguf -o csv"], "--metric-json llama-bench: llama-bench prints no JSON without "
                                                      "-o json (or -o jsonl); the command is "
                                                      "'llama-bench -m m.gguf -o csv'"),
    ("x=", [], "--metric-json must be llama-bench or llama-bench-median or [NAME[:higher|:lower][:UNIT]=]FIELD[@KEY], "
               "got 'x='"),
    ("avg_ts@pp{n_prompt", [], "--metric-json KEY is not a template like pp{n_prompt} (expected '}' before end of "
                               "string): 'avg_ts@pp{n_prompt'"),
    ("avg_ts@pp", [], "--metric-json KEY must name fields as {field} (or be llama-bench): 'avg_ts@pp'"),
])
def test_bad_specs_and_a_figure_the_engine_never_prints_are_input_errors(spec, commands, message):
    with pytest.raises(InputError) as exc:
        parse_json_metric(spec, commands)
    assert str(exc.value) == message


def test_names_are_distinct_across_metric_and_metric_json():
    assert len(parse_json_metrics(["llama-bench", "sd=stddev_ts@llama-bench"], [CMD])) == 2
    with pytest.raises(InputError) as exc:
        parse_json_metrics(["llama-bench"], [CMD], taken=["avg_ts"])
    assert str(exc.value) == "--metric and --metric-json names must be distinct; 'avg_ts' is given twice"
    assert parse_json_metric("llama-bench", ["llama-bench -m m.gguf --output=json"]).name == "avg_ts"
