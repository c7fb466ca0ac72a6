"""runs/parity.py and runs/bench.py: a run refused before its first case (an InputError from the loop, e.g. a
--ggml variant whose kernels are not in the cubin: exit 2) leaves no results file; one stopped after a case
keeps its summary (the GPU loop is stood in for: no GPU needed)."""
from __future__ import annotations

from contextlib import nullcontext

import pytest

from strata_bench.errors import InputError
from strata_bench.results.store import ResultsWriter
from strata_bench.runs import bench as bench_run, parity as parity_run


class _Selection:
    """What the runners read of a Selection, over no cases."""

    cases, catalog, devices, names, spec = (), {}, [0], {0: "gpu"}, None

    def __init__(self, directory):
        self.directory = directory

    def results_writer(self, kind, **extra):
        return ResultsWriter(self.directory, kind, {})

    def progress_bar(self, progress, what):
        return nullcontext(lambda *args: None)


def _refusing(*args, **kwargs):
    raise InputError("kernel 'k' matches no kernel of the cubin")


@pytest.mark.parametrize("kind", ["parity", "bench"])
def test_a_run_refused_before_its_first_case_writes_nothing(tmp_path, monkeypatch, kind):
    monkeypatch.setattr("strata_bench.gpu.loop.run_on_devices", _refusing)
    run = (lambda sel: parity_run.run_parity(parity_run.ParityPlan(sel))) if kind == "parity" else (
        lambda sel: bench_run.run_bench(bench_run.BenchPlan(sel)))
    with pytest.raises(InputError, match="matches no kernel"):
        run(_Selection(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_a_parity_run_stopped_after_a_case_keeps_its_summary(tmp_path, monkeypatch):
    def one_then_refuse(cases, devices, catalog, checker, keep, on_fault, advance, **kw):
        keep(_FakeResult())
        raise InputError("a later case's kernels are missing")

    monkeypatch.setattr("strata_bench.gpu.loop.run_on_devices", one_then_refuse)
    with pytest.raises(InputError):
        parity_run.run_parity(parity_run.ParityPlan(_Selection(tmp_path)))
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".json", ".jsonl"]


class _FakeResult:
    class status:  # a stand-in for the enum member
        value = "PASS"

    device = 0

    def to_record(self):
        return {"case": "c", "status": "PASS"}
