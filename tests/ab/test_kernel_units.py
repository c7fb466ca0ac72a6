"""Kernel A/B's absolute figures in every view of its results: the live table, `report` (table, markdown,
CSV), the plot's data and `compare` agree (issue 33: all but `compare` showed microseconds as seconds,
10^6 too large). The runs go through `ab --family` in-process on the numpy stand-in whose graphs run
(tests/conftest.py, `graph_standin`), with planted replay times around 16.82 us per launch."""
from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import re

import pytest
from click.testing import CliRunner

from strata_bench.ab.plan import SECONDS_PER
from strata_bench.cases import Case

US = 16.82  # the planted kernel time per launch
CASE = Case("mmvq", "iq2_xxs", rows=1, cols=4, variants=("old", "new"))


def _planted_replay(graph_, stream):
    """Runs the captured launches; each replay takes US per launch, within +/-0.3%, in a fixed pattern."""
    _planted_replay.n = getattr(_planted_replay, "n", 0) + 1
    for launch in graph_:
        launch()
    return len(graph_) * US * (1 + 0.003 * math.sin(_planted_replay.n)) * 1e-6


@pytest.fixture
def kernel_ab_file(graph_standin, monkeypatch, tmp_path):
    """`ab --family mmvq --a old --b new*1.03` on CASE with planted times, B's 3% slower by its work factor:
    (its table, its summary path)."""
    import sys

    from strata_bench.ab import kernel
    from strata_bench.cli.main import cli
    from strata_bench.families import load_builtin_families
    from strata_bench.results import provenance
    from strata_bench.gpu import devices
    from strata_bench.runs import prepare as preparing
    from strata_bench.timing import bench, graph
    from strata_bench.timing.ceilings import Ceilings

    _planted_replay.n = 0
    for module in (graph, bench):
        monkeypatch.setattr(module, "replay_seconds", _planted_replay)
    cupy = sys.modules["cupy"]
    monkeypatch.setattr(cupy.cuda, "Device", lambda device: contextlib.nullcontext(), raising=False)
    # scipy asks whether an array is cupy's: none is.
    monkeypatch.setattr(cupy, "ndarray", type("ndarray", (), {}), raising=False)
    catalog = load_builtin_families()  # the run's catalog, planted below with its one case
    monkeypatch.setattr(preparing, "prepare", lambda spec: preparing.Prepared(spec, catalog, [CASE]))
    monkeypatch.setattr(devices, "select_devices", lambda spec: [0])
    monkeypatch.setattr(devices, "device_name", lambda device: "Planted GPU")
    monkeypatch.setattr(provenance, "collect", lambda *args, **kwargs: {"devices": []})
    family = graph_standin.LazyFamily(honest=10**6)
    ceilings = Ceilings(read_bps=4e12, copy_bps=5e12)
    monkeypatch.setattr(kernel, "_arms_for_case", lambda _family, case, a, b, device: kernel.build_arms(
        family, case, a, b, None, 1000, ceilings))
    result = CliRunner().invoke(cli, ["ab", "--family", "mmvq", "--a", "old", "--b", "new*1.03", "--pairs",
                                      "8", "--seed", "3", "-q", "--results", str(tmp_path)],
                                 env={"COLUMNS": "200"})  # the table's rows unwrapped
    assert result.exit_code == 0, result.output
    (summary,) = tmp_path.rglob("ab-*.json")
    return result.stdout, summary


def _us(cell: str) -> float:
    """A figure as shown ('16.820 +/- 0.040 us', '1.682e+07 us', '+0.5 +/- 0.03 us (+3.0%)') in us: its first
    number in the unit that ends it."""
    number = re.search(r"[+-]?\d[\d.]*(?:e[+-]?\d+)?", cell).group()
    unit = re.search(r"\b(s|ms|us|ns)\b", cell).group(1)
    return float(number) * SECONDS_PER[unit] / SECONDS_PER["us"]


def _table_figures(text: str, sep: str) -> dict[str, float]:
    """From an A/B table (rich's or markdown's, cells split on `sep`): each arm's mean and median, and
    the paired mean difference, in us."""
    found = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(sep)]
        if len(cells) > 6 and cells[1] in ("A", "B"):
            found[f"{cells[1]} mean"], found[f"{cells[1]} median"] = _us(cells[5]), _us(cells[6])
    paired = re.search(r"B - A \(paired\)\W*(.*? us)", text)
    found["B - A"] = _us(paired.group(1))
    return found


def _compare_means(summary) -> dict[str, float]:
    """`compare FILE FILE`'s mean of each arm, in us (its figures are right: the reference)."""
    from strata_bench.cli.main import cli

    result = CliRunner().invoke(cli, ["compare", str(summary), str(summary), "-o", "json"])
    assert result.exit_code == 0, result.output
    return {row["case"][-1]: _us(row["old"]) for row in json.loads(result.stdout)["cases"]}


def _within_1pct(found: dict[str, float], means: dict[str, float]) -> None:
    """Every arm's figure within 1% of compare's mean of that arm; B - A within 1% of A."""
    for name, value in found.items():
        if name == "B - A":
            assert abs(value - (means["B"] - means["A"])) <= 0.01 * means["A"], (name, value, means)
        else:
            assert value == pytest.approx(means[name[0]], rel=0.01), (name, value, means)


def test_kernel_ab_shows_microseconds_in_every_view(kernel_ab_file):
    from strata_bench.ab.store import outcomes_from_records
    from strata_bench.cli.main import cli
    from strata_bench.report.plot import MetricView
    from strata_bench.results.load import load

    live, summary = kernel_ab_file
    means = _compare_means(summary)
    assert means["A"] == pytest.approx(US, rel=0.01) and means["B"] == pytest.approx(US * 1.03, rel=0.01)
    _within_1pct(_table_figures(live, "│"), means)

    def report(*args):
        result = CliRunner().invoke(cli, ["report", str(summary), *args], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        return result.stdout

    _within_1pct(_table_figures(report(), "│"), means)
    _within_1pct(_table_figures(report("-o", "md"), "|"), means)
    rows = list(csv.DictReader(io.StringIO(report("-o", "csv"))))
    for arm in "AB":
        values = [float(r["value"]) for r in rows if r["arm"] == arm and r["warmup"] == "False"]
        assert sum(values) / len(values) == pytest.approx(means[arm], rel=0.01), (arm, values)
    (outcome,) = outcomes_from_records(load(summary).records)
    view = MetricView(outcome)
    assert view.label == "kernel us per call (us)"
    for arm in "AB":
        values = [view.figure(r) for r in outcome.runs if r.arm == arm and not r.warmup]
        assert sum(values) / len(values) == pytest.approx(means[arm], rel=0.01), (arm, values)
