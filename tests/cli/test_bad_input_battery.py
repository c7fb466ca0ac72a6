"""Issue 27's bad-input battery as tests: each class is one line on stderr, exit 2, nothing written.

Results files with fields of the wrong type (report, compare, plot), paths the system refuses, plot
targets, a binary peer CSV, nan and inf options, workload numbers (before the GPU is sought), a -k that
is no regular expression, and sizes that would not fit in memory (--pairs, the --param product)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli

LONG = "x" * 300 + ".json"


@pytest.fixture
def ab_summary(tmp_path, ab_file):
    summary, _, _ = ab_file(tmp_path / "res", [1.0, 1.0, 1.01, 0.99, 1.0], [1.1, 1.1, 1.12, 1.09, 1.1])
    return summary


@pytest.fixture(autouse=True)
def _no_slow_provenance(monkeypatch):
    import strata_bench.cli.ab as ab_cmd

    monkeypatch.setattr(ab_cmd, "_provenance", lambda: {"devices": []})


def _run(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert not (result.exception and not isinstance(result.exception, SystemExit)), result.exception
    return result


def _files(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def _edit(summary, kind, key, value):
    """The records beside `summary` with `key` of every `kind` record set to `value` (JSON text, so nan and
    10**12 go in as a file could hold them)."""
    records = summary.with_suffix(".jsonl")
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    records.write_text("".join(json.dumps({**r, key: "@"}).replace('"@"', value) + "\n" if r["record"] == kind
                               else json.dumps(r) + "\n" for r in lines))
    return records


@pytest.mark.parametrize("kind,key,value,why", [
    ("run", "value", '"abc"', "record 2 (run): 'value' is \"abc\", not a finite number or null"),
    ("run", "value", "NaN", "record 2 (run): 'value' is NaN, not a finite number or null"),
    ("run", "pair", '"x"', "record 2 (run): 'pair' is \"x\", not an integer from -1 to 200000"),
    # Judging builds the schedule up to the pair: 10**15 never ended (report, plot).
    ("run", "pair", "1000000000000000", "record 2 (run): 'pair' is 1000000000000000, not an integer from -1 to "
                                        "200000"),
    ("run", "metrics", "[1, 2]", "record 2 (run): 'metrics' is [1, 2], not an object of finite numbers"),
    ("run", "same", "5", "record 2 (run): 'same' is 5, not an object of strings"),
    ("plan", "criteria", "5", "record 1 (plan): 'criteria' is 5, not an object"),
    ("plan", "pairs", "1000000000000", "record 1 (plan): 'pairs' is 1000000000000, not an integer from 0 to 100000"),
    ("plan", "arms", '{"A": 5}', "record 1 (plan): 'arms' is {\"A\": 5}, not an object of objects"),
])
@pytest.mark.parametrize("command", ["report", "report-md", "report-csv", "compare", "plot"])
def test_a_results_file_with_a_field_of_the_wrong_type(ab_summary, kind, key, value, why, command, tmp_path):
    records = _edit(ab_summary, kind, key, value)
    before = _files(tmp_path)
    result = _run(*_reading(command, ab_summary, records))
    assert result.exit_code == 2
    path = ab_summary if command in ("report", "compare", "plot") else records
    assert result.stderr.splitlines() == [f"{path}: {why}"]
    assert _files(tmp_path) == before


def _reading(command, summary, records):
    return {"report": ["report", summary], "report-md": ["report", records, "-o", "md"],
            "report-csv": ["report", records, "-o", "csv"], "compare": ["compare", summary, summary],
            "plot": ["plot", summary]}[command]


@pytest.mark.parametrize("kind,key,value,record,why", [
    ("run", "pair", "1" + "0" * 30, 2, "'pair' is an integer of 31 digits (at most 20)"),
    ("run", "value", "1e308", 2, "'value' is 1e308, beyond +/-1e+150"),  # a variance of it is inf
    ("plan", "criteria", '{"seed": ' + "9" * 5000 + "}", 1,  # past Python's int-string limit: a ValueError
     "'criteria.seed' is an integer of 5000 digits (at most 20)"),
])
@pytest.mark.parametrize("command", ["report", "report-csv", "compare", "plot"])
def test_a_number_out_of_range_names_the_record_and_the_field(ab_summary, kind, key, value, record, why, command,
                                                              tmp_path):
    records = _edit(ab_summary, kind, key, value)
    before = _files(tmp_path)
    result = _run(*_reading(command, ab_summary, records))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"{records}: record {record} (line {record}): {why}"]
    assert _files(tmp_path) == before


@pytest.mark.parametrize("command", [["report", "{s}"], ["compare", "{s}", "{s}"], ["plot", "{s}"]])
def test_a_summary_with_a_number_out_of_range(ab_summary, command):
    ab_summary.write_text(ab_summary.read_text().replace('"failures": 0', '"failures": ' + "9" * 5000))
    result = _run(*(a.format(s=ab_summary) for a in command))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"{ab_summary}: 'failures' is an integer of 5000 digits (at most 20)"]


def test_results_verify_names_a_summary_with_a_number_out_of_range(ab_summary):
    ab_summary.write_text(ab_summary.read_text().replace('"failures": 0', '"failures": ' + "9" * 5000))
    result = _run("results", "verify", ab_summary.parent)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [f"results verify: 1 of 1 summaries not current (first: {ab_summary.name}: "
                                          "'failures' is an integer of 5000 digits (at most 20))"]


@pytest.mark.parametrize("key,value,why", [("provenance", 5, "provenance 5 is not an object"),
                                           ("failures", "x", 'failures "x" is not an integer')])
def test_a_summary_with_a_field_of_the_wrong_type(ab_summary, key, value, why):
    body = json.loads(ab_summary.read_text())
    ab_summary.write_text(json.dumps({**body, key: value}))
    for args in (["report", ab_summary], ["compare", ab_summary, ab_summary]):
        result = _run(*args)
        assert result.exit_code == 2
        assert result.stderr.splitlines() == [f"{ab_summary} is not a results summary ({why})"]


@pytest.mark.parametrize("args", [["report", "{long}"], ["compare", "{long}", "{summary}"],
                                  ["compare", "{summary}", "{long}"], ["plot", "{long}"]])
def test_a_path_the_system_refuses(ab_summary, tmp_path, args):
    long = tmp_path / LONG
    result = _run(*(a.format(long=long, summary=ab_summary) for a in args))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"results file {str(long)[:80]}...: File name too long"]


@pytest.mark.parametrize("target,why", [
    ("missing/x.png", "{root}/missing does not exist"),
    ("taken/x.png", "{root}/taken is not a folder"),
    ("x.xyz", ".xyz is not an image type matplotlib writes ("),
    ("x", "no extension is not an image type matplotlib writes ("),
])
def test_plot_targets_are_checked_before_drawing(ab_summary, tmp_path, target, why):
    pytest.importorskip("matplotlib")
    (tmp_path / "taken").write_text("")
    before = _files(tmp_path)
    result = _run("plot", ab_summary, "-o", tmp_path / target)
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"plot: cannot write {tmp_path / target}: {why.format(root=tmp_path)}")
    assert _files(tmp_path) == before


def test_plot_to_an_empty_path_is_one_line(ab_summary, tmp_path):
    before = _files(tmp_path)
    result = _run("plot", ab_summary, "-o", "")  # it wrote the default png beside the input, exit 0
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["--out '': the path is empty"]  # the type of every path option
    assert _files(tmp_path) == before


def test_plot_to_a_name_too_long_is_one_line(ab_summary, tmp_path):
    pytest.importorskip("matplotlib")
    target = tmp_path / ("y" * 300 + ".png")
    result = _run("plot", ab_summary, "-o", target)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"plot: cannot write {target}: File name too long"]


def _bench_file(root):
    from strata_bench.results.store import ResultsWriter

    writer = ResultsWriter(root, "bench", {})
    writer.append({"family": "mmvq", "status": "timed", "rows": 131072, "cols": 8192, "ncols": 1,
                   "format": "iq2_xs", "variant": "new", "median_us": 100.0, "gbps": 2000.0, "frac_read": 0.5})
    return writer.finish({}, 0)


def test_report_peer_of_a_binary_csv(tmp_path):
    peer = tmp_path / "peer.csv"
    peer.write_bytes(b"format,ncols,us\n\xff\xfe,1,2\n")
    result = _run("report", "--peer", peer, _bench_file(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"{peer} is not a UTF-8 CSV (byte 16 is 0xff)"]


def test_report_peer_of_a_bench_record_with_a_wrong_type(tmp_path):
    peer = tmp_path / "peer.csv"
    peer.write_text("format,ncols,us\niq2_xs,1,50\n")
    bench = _bench_file(tmp_path)
    records = bench.with_suffix(".jsonl")
    records.write_text(records.read_text().replace('"rows": 131072', '"rows": "many"'))
    result = _run("report", "--peer", peer, bench)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["bench record 1: 'rows' is \"many\", not an integer"]


@pytest.mark.parametrize("args,option,value", [
    (["ab", "--timeout", "nan", "--", "true"], "'--timeout'", "nan"),
    (["ab", "--timeout", "inf", "--", "true"], "'--timeout'", "inf"),
    (["ab", "--timeout", "1e400", "--", "true"], "'--timeout'", "1e400"),
    (["ab", "--ready-timeout", "nan", "--", "true"], "'--ready-timeout'", "nan"),
    (["ab", "--same-band", "nan", "--", "true"], "'--same-band'", "nan"),
    (["ab", "--fail-on-regression", "inf", "--", "true"], "'--fail-on-regression'", "inf"),
    (["compare", "--threshold", "nan", "{summary}", "{summary}"], "'--threshold' / '--same-band'", "nan"),
    (["compare", "--fail-on-regression", "nan", "{summary}", "{summary}"], "'--fail-on-regression'", "nan"),
])
def test_nan_and_inf_options(ab_summary, tmp_path, monkeypatch, args, option, value):
    monkeypatch.chdir(tmp_path)
    before = _files(tmp_path)
    result = _run(*(a.format(summary=ab_summary) for a in args))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"Error: Invalid value for {option}: {value!r} is not a finite number (see 'cli {args[0]} --help')"]
    assert _files(tmp_path) == before  # `ab --timeout nan` wrote its records before failing


@pytest.mark.parametrize("args,line", [
    (["--layers", "0"], "Error: Invalid value for '--layers': 0 is not in the range x>=1. (see 'cli workload --help')"),
    (["--decode", "-1"], "Error: Invalid value for '--decode': -1 is not in the range x>=1. "
                         "(see 'cli workload --help')"),
    (["--weights", "missing.gguf"], "--weights must be a quant format the stack runs (iq1_m, iq2_s, iq2_xs, "
                                    "iq2_xxs, iq3_s, iq3_xxs, iq4_xs, q2_0), got 'missing.gguf'"),
])
def test_workload_numbers_are_checked_before_the_gpu(monkeypatch, args, line):
    from strata_bench.gpu import devices

    monkeypatch.setattr(devices, "probe", lambda: devices.GpuProbe(False, 0, "no GPU (test)"))
    result = _run("workload", *args)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [line]


@pytest.mark.parametrize("pattern,why", [("(", "missing ), unterminated subpattern at position 0"),
                                         ("a{99999999999}", "the repetition number is too large")])
@pytest.mark.parametrize("command", [["parity", "--list"], ["bench", "--list"],
                                     ["ab", "--family", "mmvq", "--a", "old", "--b", "new"]])
def test_k_that_is_no_regular_expression(tmp_path, monkeypatch, pattern, why, command):
    monkeypatch.chdir(tmp_path)
    result = _run(*command, "-k", pattern)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"-k {pattern!r} is not a regular expression: {why}"]
    assert _files(tmp_path) == []


@pytest.mark.parametrize("args,line", [
    (["--pairs", "4000000000"], "--pairs must be from 1 to 100000, got 4000000000"),
    (["--warmup", "99999999999"], "--warmup must be from 0 to 100000, got 99999999999"),
    (["--param", "a=" + ",".join(map(str, range(2000))), "--param", "b=" + ",".join(map(str, range(2000)))],
     "--param makes 4000000 combinations (2000 a x 2000 b), more than 1000"),
])
def test_sizes_that_would_not_fit_are_refused_at_once(tmp_path, monkeypatch, args, line):
    monkeypatch.chdir(tmp_path)
    result = _run("ab", *args, "--", "true")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [line]
    assert _files(tmp_path) == []
