"""`strata-bench parity`: what it says about the cases it selected."""
from __future__ import annotations

from click.testing import CliRunner

from strata_bench.cli.main import cli


def test_list_prints_only_case_names_and_the_real_weight_count_goes_to_stderr():
    result = CliRunner().invoke(cli, ["parity", "--list"])
    assert result.exit_code == 0, result.output
    names = result.stdout.splitlines()
    assert len(names) == 412 and all(name.count("/") >= 4 for name in names)
    # 60 cases on the 10 shipped real-weight fixtures (dequant and mmvq of 11 formats, the rest fused families);
    # a lost fixtures folder or family changes both numbers.
    assert result.stderr.strip() == "412 cases selected, 60 of them on real weights (10 fixtures)"


def test_a_filter_changes_the_count():
    result = CliRunner().invoke(cli, ["parity", "--list", "--family", "dequant"])
    # one real-weight case per format; q2_0 re-quantizes the q8_0 rows, so 11 cases read 10 fixtures
    assert result.stderr.strip() == "33 cases selected, 11 of them on real weights (10 fixtures)"
