"""The command that reruns one case: its exact text for a few requests, and, through `parity --list`, that
it selects that case and no other (defaults, a --shape/--cols sweep, real weights)."""
from __future__ import annotations

import re
import shlex

import pytest
from click.testing import CliRunner

from strata_bench.cases import Case, CaseFilter
from strata_bench.cases.request import CaseRequest
from strata_bench.cases.rerun import exact_name_pattern, rerun_command
from strata_bench.cli.main import cli

MMVQ = Case("mmvq", "iq2_xs", 131072, 8192, 8, "seed:1")
PFGEMM = Case("pfgemm", "iq2_s", 256, 1536, 150, "fixture:smollm2-ffn_down.iq2_s", params=(("groups", "0,1,15"),))


@pytest.mark.parametrize("case,kwargs,line", [
    (MMVQ, {}, "strata-bench parity --family mmvq --format iq2_xs -k '^mmvq/iq2_xs/131072x8192/n8/seed:1$'"),
    (MMVQ, {"request": CaseRequest(shape=(131072, 8192), cols=(1, 8)), "device": 1, "cases_file": "my cases.py",
            "kernels_dir": "k/"},
     r"strata-bench parity --family mmvq --format iq2_xs -k '^mmvq/iq2_xs/\d+x\d+/n\d+/seed:1$' "
     "--cases 'my cases.py' --kernels k/ --shape 131072x8192 --cols 8 --device 1"),
    (MMVQ, {"request": CaseRequest(cols=(1, 8))},
     r"strata-bench parity --family mmvq --format iq2_xs -k '^mmvq/iq2_xs/131072x8192/n\d+/seed:1$' --cols 8"),
    (PFGEMM, {"request": CaseRequest(fixtures=("smollm2-*", "x"), cols=(4, 1))},
     r"strata-bench parity --family pfgemm --format iq2_s "
     r"-k '^pfgemm/iq2_s/256x1536/n150/fixture:smollm2\-ffn_down\.iq2_s/groups=0,1,15$' "
     "--fixtures 'smollm2-*' --fixtures x --cols 4,1"),
    (PFGEMM, {"request": CaseRequest(gguf="my model.gguf", tensor=r"blk\.0\.", rows=(0, 64), variants=("v.toml",))},
     r"strata-bench parity --family pfgemm --format iq2_s "
     r"-k '^pfgemm/iq2_s/256x1536/n150/fixture:smollm2\-ffn_down\.iq2_s/groups=0,1,15$' "
     r"--variants v.toml --gguf 'my model.gguf' --tensor 'blk\.0\.' --rows 0:64"),
])
def test_rerun_command_text(case, kwargs, line):
    assert rerun_command(case, **kwargs) == line


def test_exact_pattern_matches_the_name_alone():
    flt = CaseFilter(pattern=exact_name_pattern(MMVQ.name))
    assert flt.matches(MMVQ)
    others = [Case("mmvq", "iq2_xs", 131072, 8192, 8, "seed:10"), Case("mmvq", "iq2_xs", 131072, 8192, 8, "seed:1",
                                                                        params=(("col", 1),)),
              Case("mmvq", "iq2_xs", 1131072, 8192, 8, "seed:1"), Case("mmvq", "iq2_xs", 131072, 8192, 8, "seed-1")]
    assert not any(flt.matches(c) for c in others)
    assert re.search(exact_name_pattern("a.b"), "axb") is None


def _selected(args):
    """The request and the cases `parity ARGS` selects, as the CLI makes them (no GPU)."""
    from strata_bench.cli.options import make_filter, parse_cols, parse_shape
    from strata_bench.runner.loop import prepare_cases

    def values(option):
        return tuple(v for k, v in zip(args[::2], args[1::2]) if k == option)

    shape, cols = values("--shape"), values("--cols")
    request = CaseRequest(shape=parse_shape(shape[0] if shape else None), cols=parse_cols(cols[0] if cols else None),
                          fixtures=values("--fixtures"))
    return request, prepare_cases(make_filter(values("--family"), values("--format"), None), request=request)


@pytest.mark.parametrize("args,pick", [
    (["--family", "q8_1"], 3),
    (["--family", "q2warp", "--shape", "12288x2560"], 5),
    (["--family", "mmvq", "--format", "iq2_s", "--shape", "131072x8192", "--cols", "1,8"], 1),
    (["--family", "mmvq", "--format", "q8_0", "--cols", "2,8"], 2),
    (["--fixtures", "smollm2-ffn_down.iq2_s", "--cols", "4"], 2),
])
def test_the_command_lists_exactly_its_case(args, pick):
    """The command made for one case of a run lists that case alone (`parity --list`: no GPU)."""
    request, cases = _selected(args)
    case = cases[pick]
    words = shlex.split(rerun_command(case, request))
    assert words[:2] == ["strata-bench", "parity"]
    result = CliRunner().invoke(cli, [*words[1:], "--list"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [case.name]
