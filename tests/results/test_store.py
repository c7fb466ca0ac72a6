"""Reading results back refuses what is not a results file with one line (binary bytes, a schema that is
not a version number, a summary without its records file, a record that is not an object)."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli
from strata_bench.errors import InputError
from strata_bench.results.store import read_records, read_summary

BINARY = bytes(range(128, 256)) * 3


@pytest.mark.parametrize("name,body,reason", [
    ("b.jsonl", BINARY, "is not a results file (line 1 is not UTF-8 JSON)"),
    ("n.jsonl", b'{"case": "a"}\n5\n{"case": "b"}\n', "is not a results file (line 2 is 5, not a JSON object)"),
    ("s1.json", b'{"schema":1}', "is not a results summary (records_file null is not a file name)"),
    ("s2.json", b'{"schema":"1"}', 'is not a results summary (schema "1" is not a version number)'),
    ("p.json", b'{"schema":1,"records_file":"../x.jsonl"}',
     'is not a results summary (records_file "../x.jsonl" is not a file name)'),
])
def test_bad_results_files_are_one_line_exit_2(tmp_path, name, body, reason):
    path = tmp_path / name
    path.write_bytes(body)
    with pytest.raises(InputError, match="^" + __import__("re").escape(f"{path} {reason}") + "$"):
        read_summary(path) if name.endswith(".json") else read_records(path)
    for args in (["report", str(path)], ["compare", str(path), str(path)]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, result.output
        assert result.stderr.splitlines() == [f"{path} {reason}"]


def test_a_cut_last_line_is_dropped_and_the_rest_kept(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"case": "a"}\n{"case": "b"}\n{"case": "c", "val')
    assert read_records(path) == [{"case": "a"}, {"case": "b"}]


def test_a_bad_summary_does_not_break_list_or_verify_of_the_folder(tmp_path):
    (tmp_path / "s2.json").write_bytes(b'{"schema":"1"}')
    listed = CliRunner().invoke(cli, ["results", "list", str(tmp_path)])
    assert listed.exit_code == 0 and "1 summaries" in listed.stdout
    verified = CliRunner().invoke(cli, ["results", "verify", str(tmp_path)])
    assert verified.exit_code == 1
    assert verified.stderr.splitlines()[-1].endswith('s2.json: is not a results summary (schema "1" is not a '
                                                     'version number))')


def _write_run(directory, stamp, tag, start):
    from strata_bench.results.store import ResultsWriter

    start.wait()  # both writers open their files at the same moment, with the same stamp
    writer = ResultsWriter(directory, "ab", {"run": tag}, stamp=stamp)
    for i in range(5):
        writer.append({"record": "run", "run": tag, "i": i})
    writer.finish({"run": tag}, failures=0)


def test_two_runs_started_at_once_into_one_folder_lose_nothing(tmp_path):
    """50 rounds of two processes writing results with one stamp into one folder: two record files,
    each with its own 5 records, and two summaries, each naming its own records file."""
    import json
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    for round_ in range(50):
        directory = tmp_path / str(round_)
        start = ctx.Barrier(2)
        procs = [ctx.Process(target=_write_run, args=(directory, "20260101T000000Z", tag, start)) for tag in "xy"]
        for p in procs:
            p.start()
        for p in procs:
            p.join(30)
        assert [p.exitcode for p in procs] == [0, 0]
        summaries = sorted(directory.glob("*.json"))
        assert [p.name for p in summaries] == ["ab-20260101T000000Z-2.json", "ab-20260101T000000Z.json"]
        seen = set()
        for summary in summaries:
            body = json.loads(summary.read_text())
            assert body["records_file"] == summary.with_suffix(".jsonl").name
            records = read_records(summary)
            assert [r["run"] for r in records] == [body["summary"]["run"]] * 5
            assert [r["i"] for r in records] == list(range(5))
            seen.add(body["summary"]["run"])
        assert seen == {"x", "y"}
        assert sorted(p.name for p in directory.iterdir() if p.suffix not in (".json", ".jsonl")) == []
