"""The workload's kernel choice follows the environment switches (no GPU needed to check the choice)."""
import pytest

from strata_bench.workloads import decoder as workload
from strata_bench.errors import InputError


def test_defaults_are_the_new_kernels(monkeypatch):
    for name in ("STRATA_OLD_IQ_MMVQ", "STRATA_Q2_WARP", "STRATA_PF_WMMA2"):
        monkeypatch.delenv(name, raising=False)
    v = workload.chosen_variants()
    assert (v["mmvq"], v["grouped"], v["q2warp"]) == ("new", "new", "new")


def test_switches_choose_old_kernels(monkeypatch):
    monkeypatch.setenv("STRATA_OLD_IQ_MMVQ", "1")
    monkeypatch.setenv("STRATA_Q2_WARP", "0")
    v = workload.chosen_variants()
    assert (v["mmvq"], v["grouped"], v["q2warp"]) == ("old", "old", "old")
    assert all(s.variant == "old" for s in workload.decode_steps("iq2_xxs") if s.family in ("mmvq", "grouped"))


def test_bad_switch_value_is_an_input_error(monkeypatch):
    monkeypatch.setenv("STRATA_Q2_WARP", "yes")
    with pytest.raises(InputError, match="STRATA_Q2_WARP must be 0 or 1"):
        workload.chosen_variants()


def test_prefill_repeats_cover_every_token():
    steps = {s.family: s for s in workload.prefill_steps("iq2_xxs", 37)}
    assert steps["q2warp"].repeats * steps["q2warp"].case.ncols >= 37
    assert steps["mmvq"].repeats * steps["mmvq"].case.ncols >= 37
    assert steps["moe_combine"].case.rows == 37
