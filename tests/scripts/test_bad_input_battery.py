"""scripts/bad_input_battery.py on a sample of its inputs: the trials are made from the commands' own options,
each outcome is judged by the CLI's rules, and the rules see a traceback, a hang and a usage error of two lines."""
from __future__ import annotations

import importlib.util
import sys

from strata_bench.kernels.sources import REPO_ROOT

spec = importlib.util.spec_from_file_location("bad_input_battery", REPO_ROOT / "scripts" / "bad_input_battery.py")
battery = importlib.util.module_from_spec(spec)
sys.modules["bad_input_battery"] = battery
spec.loader.exec_module(battery)


def test_every_option_of_every_command_gets_every_bad_value():
    trials = battery.trials(REPO_ROOT)
    commands = {" ".join(t.command) for t in trials}
    assert {"parity", "bench", "ab", "compile", "report", "compare", "plot", "results verify"} <= commands
    assert len(trials) % len(battery.BAD) == 0 and len(trials) >= 1850
    assert any(t.label.startswith("--junit=") for t in trials)  # an option added since is tried too


def test_a_sample_keeps_the_rules():
    sample = [t for t in battery.trials(REPO_ROOT) if t.command == ("parity",) and t.label.split("=")[0] in
              ("--shape", "--junit")][::5]
    outcomes = [battery.run(t, REPO_ROOT) for t in sample]
    assert len(outcomes) >= 6 and all(o.code is not None for o in outcomes)
    assert [(o.trial.label, o.problems) for o in outcomes if o.problems] == []


def test_the_rules_see_what_they_forbid():
    trial = battery.Trial(("parity",), "--x='y'", ())
    assert battery.Outcome(trial, None, False, 0, 0, 0).problems == ["hang"]
    assert battery.Outcome(trial, 1, True, 9, 0, 0).problems == ["traceback"]
    assert battery.Outcome(trial, 2, False, 2, 1, 0).problems == ["2 lines", "written"]
    assert battery.Outcome(trial, 3, False, 1, 0, 1).problems == ["exit 3", "left"]


def test_a_run_can_be_narrowed_to_options_and_values():
    trials = battery.trials(REPO_ROOT)
    chosen = [t for t in trials if battery.selected(t, ["--results", "path"], [""])]
    assert {" ".join(t.command) for t in chosen} == {"parity", "bench", "ab", "report", "plot"}
    assert {t.label for t in chosen} == {"--results=''", "path=''"}
    assert [t for t in trials if battery.selected(t, [], [])] == trials
