"""Kernel A/B pieces that need no GPU: variant specs and the planted work factor's launch count."""
import pytest

from strata_bench.ab.kernel import _GraphArm, parse_variant
from strata_bench.errors import InputError


def test_variant_specs():
    assert parse_variant("new") == ("new", 1.0)
    assert parse_variant("new*1.03") == ("new", 1.03)
    for bad in ("new*", "new*9", "*1.03", "a b"):
        with pytest.raises(InputError):
            parse_variant(bad)


def test_planted_factor_is_not_rounded_to_whole_rotations(monkeypatch):
    captured = {}

    def fake_capture(family, case, variant, kernels, prep, total, stream):
        captured["total"] = total
        return object()

    monkeypatch.setattr("strata_bench.timing.graph.capture", fake_capture)

    class Prep:
        devs = [None] * 11  # 11 input copies, as for a 17 MB weight set on a 60 MiB L2

    class Stream:
        def __enter__(self): return self
        def __exit__(self, *a): return False

    arm = _GraphArm(None, None, "new", 1.03, None, Prep(), 143, Stream())
    assert captured["total"] == 147
    assert arm.factor == pytest.approx(1.03, abs=0.005)


# ---------------------------------------------------------------------------------------------------
# Timed outputs checked, on the numpy stand-in whose graphs run (tests/conftest.py, `graph_standin`)

from strata_bench.ab.kernel import build_arms, run_case  # noqa: E402
from strata_bench.ab.plan import make_plan  # noqa: E402
from strata_bench.ab.records import AbReport  # noqa: E402
from strata_bench.ab.store import outcomes_from_records  # noqa: E402
import json  # noqa: E402
from strata_bench.cases import Case  # noqa: E402
from strata_bench.errors import CheckFailed  # noqa: E402
from strata_bench.timing.ceilings import Ceilings  # noqa: E402

CEILINGS = Ceilings(read_bps=4e12, copy_bps=5e12)
TOY = Case("toy", "f32", rows=1, cols=4, variants=("old", "lazy", "lazy2"))
PLAN = make_plan("abba", pairs=4, warmup=1, seed=1)


class _Records(list):
    def append(self, record): super().append(dict(record))


def _ab(standin, a, b, honest=2, bytes_per_call=1000):
    family = standin.LazyFamily(honest=honest, bytes_per_call=bytes_per_call)
    arms = build_arms(family, TOY, a, b, None, 1000, CEILINGS)
    records = _Records()
    return run_case(arms, PLAN, records), records


def _lazy_differs(spec, arm_copy=0):
    return (f"timed output differs: {spec} copy {arm_copy} of 3: y: 4 of 4 elements differ; first at index 0: "
            f"checked=np.float32(0.0) (0x00000000) timed=np.float32(nan) (0xffffffff), 2147483647 ulp; "
            f"worst at index 0: checked=np.float32(0.0) (0x00000000) timed=np.float32(nan) (0xffffffff), "
            f"2147483647 ulp")


@pytest.mark.parametrize("spec_b", ["lazy", "lazy*1.03"])  # the planted work factor is checked too
def test_kernel_ab_rejects_a_variant_that_works_only_on_its_first_launches(graph_standin, spec_b):
    outcome, records = _ab(graph_standin, "old", spec_b)
    assert outcome.rejected == _lazy_differs(spec_b)
    assert outcome.comparison.verdict.value == "UNDECIDED"  # never FASTER
    assert outcome.comparison.reason == "rejected: " + _lazy_differs(spec_b)
    assert all(m.comparison.verdict.value == "UNDECIDED" for m in outcome.metrics)
    assert records[-1] == {"record": "rejected", "case": TOY.name, "reason": _lazy_differs(spec_b)}
    assert outcome.summary()["rejected"] == _lazy_differs(spec_b)
    assert f"rejected: {_lazy_differs(spec_b)}" in outcome.notes()
    with pytest.raises(CheckFailed) as err:
        AbReport((outcome,), None, None).raise_for_status()
    assert str(err.value) == f"{TOY.name}: {_lazy_differs(spec_b)}" and err.value.exit_code == 1
    # The report rebuilt from the records alone says the same.
    rebuilt, = outcomes_from_records(records)
    assert rebuilt.rejected == outcome.rejected and rebuilt.comparison.verdict.value == "UNDECIDED"


def test_kernel_ab_checks_arm_a_too(graph_standin):
    outcome, _ = _ab(graph_standin, "lazy", "old")
    assert outcome.rejected == _lazy_differs("lazy")


def test_each_arm_writes_its_own_outputs_so_an_honest_arm_does_not_cover_for_a_lazy_one(graph_standin):
    # lazy2 follows old on the same inputs; were the outputs shared, old's last run would leave them right.
    outcome, _ = _ab(graph_standin, "old", "lazy2")
    assert outcome.rejected == _lazy_differs("lazy2")


@pytest.mark.parametrize("a, b", [("old", "old"), ("old", "old*1.03"), ("old", "lazy")])
def test_kernel_ab_of_honest_variants_is_not_rejected(graph_standin, a, b):
    outcome, records = _ab(graph_standin, a, b, honest=10**6)  # "lazy" does its work on every launch here
    assert outcome.rejected == "" and "rejected" not in outcome.summary()
    assert [r["record"] for r in records].count("rejected") == 0
    AbReport((outcome,), None, None).raise_for_status()


def test_kernel_ab_rejects_a_time_beyond_the_roofline(graph_standin):
    # 1 us per launch for 40 MB: at 4 TB/s the least is 10 us.
    outcome, _ = _ab(graph_standin, "old", "old", honest=10**6, bytes_per_call=40_000_000)
    assert outcome.rejected == ("impossible: old at 1.000 us moves 40000000 bytes at 1000% of the measured "
                                "read ceiling (4.00 TB/s, least 10.000 us)")
    assert outcome.comparison.verdict.value == "UNDECIDED"


# ---------------------------------------------------------------------------------------------------
# On the GPU: the project's variant that works only on its first launches (tests/data/lazy_family)

import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

LAZY = Path(__file__).parent.parent / "data" / "lazy_family"


def _kernel_ab(tmp_path, a, b):
    return subprocess.run([sys.executable, "-m", "strata_bench", "ab", "--kernels", str(LAZY), "--cases",
                           str(LAZY / "cases.py"), "--family", "lazy_demo", "--a", a, "--b", b, "--pairs", "4",
                           "--results", str(tmp_path), "-q", "-o", "json"],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.gpu
@pytest.mark.parametrize("spec_b", ["lazy", "lazy*1.03"])
def test_kernel_ab_rejects_the_lazy_variant_with_exit_1(tmp_path, spec_b):
    proc = _kernel_ab(tmp_path, "honest", spec_b)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "Traceback" not in out and "FASTER" not in out
    assert f"timed output differs: {spec_b} copy 0 of" in out
    (records_file,) = tmp_path.rglob("ab-*.jsonl")
    kinds = [json.loads(line).get("record") for line in records_file.read_text().splitlines()]
    assert kinds.count("rejected") == 1


@pytest.mark.gpu
def test_kernel_ab_of_the_honest_variant_against_itself_is_not_rejected(tmp_path):
    proc = _kernel_ab(tmp_path, "honest", "honest")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "rejected" not in out


@pytest.mark.parametrize("output", ["json", "md"])
def test_a_rejected_case_is_rendered_undecided_with_its_reason_never_faster(graph_standin, output):
    from strata_bench.report.ab import render_ab

    outcome, _ = _ab(graph_standin, "old", "lazy")
    text = render_ab((outcome,), output)
    assert "UNDECIDED" in text and "rejected: timed output differs: lazy copy 0 of 3" in text
    assert "FASTER" not in text


# ---------------------------------------------------------------------------------------------------
# Clocks around every run, throttled pairs and the sensitivity in the notes (a planted clock reader)

class _PlantedClocks:
    """Reads 1980 MHz, except that the readings numbered in `capped` carry NVML's power-cap reason."""

    def __init__(self, capped=()):
        self.n, self.capped = 0, set(capped)

    def read(self):
        from strata_bench.timing.clocks import ClockSample

        self.n += 1
        return ClockSample(1980, 3201, 50, 400.0, 0x4 if self.n in self.capped else 0x1)

    def summary(self, samples):
        from strata_bench.timing.clocks import summarize

        return summarize(samples)


def test_kernel_ab_reads_clocks_around_each_run_and_flags_the_pairs_measured_while_throttled(graph_standin):
    from strata_bench.ab.kernel import sensitivity, throttled_pairs

    family = graph_standin.LazyFamily(honest=10**6)
    # 4 warm-up replays in build_arms read 8 times, the plan's first (warm-up) pair 4 more: reading 13 is
    # the start of the first measured run (pair 0; warm-up pairs are numbered below 0).
    arms = build_arms(family, TOY, "old", "old", None, 1000, CEILINGS, clocks=_PlantedClocks(capped={13}))
    records = _Records()
    outcome = run_case(arms, PLAN, records)
    runs = [r for r in records if r["record"] == "run"]
    assert all(r["clocks"]["samples"] == 2 and r["clocks"]["sm_mhz"] == [1980, 1980] for r in runs)
    assert [r["pair"] for r in runs if r["clocks"]["throttled"]] == [0]
    assert throttled_pairs(outcome) == {0: ("sw_power_cap",)}
    # Equal times in every run: the interval is a point, so the data could see any change.
    assert sensitivity(outcome) == "could see >= 0.0% (4 pairs)"
    assert outcome.notes()[-2:] == [
        "could see >= 0.0% (4 pairs)",
        "throttled: pairs 0 measured while the clocks were held down (sw_power_cap)"]
    timing, = [r for r in records if r["record"] == "timing"]
    assert timing["throttled_pairs"] == [0] and timing["notes"] == list(outcome.flags)
    assert timing["rotation"]["l2_multiple"] == 3.048 and timing["rotation"]["warning"] == ""
    AbReport((outcome,), None, None).raise_for_status()  # throttling is flagged, not a failure


def test_kernel_ab_without_clocks_still_states_its_sensitivity(graph_standin):
    outcome, records = _ab(graph_standin, "old", "old", honest=10**6)
    assert outcome.flags == ("could see >= 0.0% (4 pairs)",)
    assert all("clocks" not in r for r in records if r["record"] == "run")
