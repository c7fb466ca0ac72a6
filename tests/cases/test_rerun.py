"""The command that reruns one case: its exact text for a few specs, and the round trip over every option and
extension: a command line's cases, each one's rerun command, and that command selecting exactly that case
(`parity --list`: no GPU)."""
from __future__ import annotations

import re
import shlex

import pytest
from click.testing import CliRunner

from strata_bench.cases import Case, CaseFilter
from strata_bench.cases.extensions import CaseFile
from strata_bench.toml_abi.extension import TomlVariants
from strata_bench.cases.request import CaseRequest
from strata_bench.cases.rerun import rerun_command
from strata_bench.cases.spec import RunSpec, exact_name_pattern
from strata_bench.cli.main import cli
from strata_bench.ggml.extension import Ggml
from tests.ggml_trees import write_fake_tree

MMVQ = Case("mmvq", "iq2_xs", 131072, 8192, 8, "seed:1")
PFGEMM = Case("pfgemm", "iq2_s", 256, 1536, 150, "fixture:smollm2-ffn_down.iq2_s", params=(("groups", "0,1,15"),))


@pytest.mark.parametrize("case,spec,device,line", [
    (MMVQ, RunSpec(), None, "strata-bench parity --family mmvq --format iq2_xs -k '^mmvq/iq2_xs/131072x8192/n8/seed:1$'"),
    (MMVQ, RunSpec(request=CaseRequest(shape=(131072, 8192), cols=(1, 8)),
                   extensions=(CaseFile("my cases.py", "k/"),)), 1,
     r"strata-bench parity --family mmvq --format iq2_xs -k '^mmvq/iq2_xs/\d+x\d+/n\d+/seed:1$' "
     "--cases 'my cases.py' --kernels k/ --shape 131072x8192 --cols 8 --device 1"),
    (MMVQ, RunSpec(request=CaseRequest(cols=(1, 8))), None,
     r"strata-bench parity --family mmvq --format iq2_xs -k '^mmvq/iq2_xs/131072x8192/n\d+/seed:1$' --cols 8"),
    (PFGEMM, RunSpec(request=CaseRequest(fixtures=("smollm2-*", "x"), cols=(4, 1))), None,
     r"strata-bench parity --family pfgemm --format iq2_s "
     r"-k '^pfgemm/iq2_s/256x1536/n150/fixture:smollm2\-ffn_down\.iq2_s/groups=0,1,15$' "
     "--fixtures 'smollm2-*' --fixtures x --cols 4,1"),
    (PFGEMM, RunSpec(request=CaseRequest(gguf="my model.gguf", tensor=r"blk\.0\.", rows=(0, 64)),
                     extensions=(TomlVariants(("v.toml",)),)), None,
     r"strata-bench parity --family pfgemm --format iq2_s "
     r"-k '^pfgemm/iq2_s/256x1536/n150/fixture:smollm2\-ffn_down\.iq2_s/groups=0,1,15$' "
     r"--variants v.toml --gguf 'my model.gguf' --tensor 'blk\.0\.' --rows 0:64"),
    (MMVQ, RunSpec(device="all", extensions=(Ggml("tree", "tree b"),)), 2,
     "strata-bench parity --family mmvq --format iq2_xs -k '^mmvq/iq2_xs/131072x8192/n8/seed:1$' "
     "--ggml tree --ggml-b 'tree b' --device 2"),
])
def test_rerun_command_text(case, spec, device, line):
    assert rerun_command(case, spec, device) == line


def test_exact_pattern_matches_the_name_alone():
    flt = CaseFilter(pattern=exact_name_pattern(MMVQ.name))
    assert flt.matches(MMVQ)
    others = [Case("mmvq", "iq2_xs", 131072, 8192, 8, "seed:10"), Case("mmvq", "iq2_xs", 131072, 8192, 8, "seed:1",
                                                                        params=(("col", 1),)),
              Case("mmvq", "iq2_xs", 1131072, 8192, 8, "seed:1"), Case("mmvq", "iq2_xs", 131072, 8192, 8, "seed-1")]
    assert not any(flt.matches(c) for c in others)
    assert re.search(exact_name_pattern("a.b"), "axb") is None


@pytest.fixture(scope="module")
def ggml_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("ggml") / "llama.cpp"
    write_fake_tree(root / "ggml")
    return str(root)


def _listed(args: list[str]) -> list[str]:
    result = CliRunner().invoke(cli, ["parity", *args, "--list"])
    assert result.exit_code == 0, (args, result.output)
    return [line.split("  variants=")[0] for line in result.stdout.splitlines()]


# Every option that selects cases, and every extension: alone and combined. A new option or extension that
# the rerun command forgets fails here (before the Extension protocol, --ggml's own cases were lost).
ROUND_TRIPS = [
    ["--family", "q8_1"],
    ["--family", "mmvq", "--format", "q8_0", "-k", "n[28]"],
    ["--family", "q2warp", "--shape", "12288x2560"],
    ["--family", "mmvq", "--format", "iq2_s", "--shape", "131072x8192", "--cols", "1,8"],
    ["--family", "mmvq", "--format", "q8_0", "--cols", "2,8"],
    ["--fixtures", "smollm2-ffn_down.iq2_s", "--cols", "4"],
    ["--family", "dequant", "--gguf", "tests/data/gguf/other-rows.gguf", "--tensor", r"blk\.0\.", "--rows", "0:8"],
    ["--family", "mmvq", "--format", "iq4_xs", "--variants", "examples/toml_variant/variants.toml"],
    ["--family", "my_dequant", "--cases", "examples/dequant_rows/cases.py", "--kernels", "examples/dequant_rows"],
    ["--family", "mmvq,dequant", "--format", "q4_k,iq2_xxs", "--ggml", "{ggml}"],
    ["--family", "mmvq", "--format", "q4_k", "--ggml", "{ggml}", "--ggml-b", "{ggml}", "--cols", "1,8"],
    ["--family", "mmvq", "--format", "iq3_s", "--variants", "examples/toml_variant/variants.toml", "--ggml", "{ggml}",
     "--shape", "4096x14336", "--cols", "2", "--device", "1"],
]


@pytest.mark.parametrize("args", ROUND_TRIPS, ids=lambda a: " ".join(a))
def test_every_case_of_a_run_is_rerun_by_its_command_alone(args, ggml_tree):
    args = [a.replace("{ggml}", ggml_tree) for a in args]
    from strata_bench.cli.options import run_options

    captured = {}

    @run_options("parity")
    def declare(spec, **_):
        captured["spec"] = spec

    import click

    click.command()(click.option("--device", "device_spec", default="0")(declare)).main(args, standalone_mode=False)
    spec = captured["spec"]
    names = _listed(args)
    assert names
    for name in {names[0], names[len(names) // 2], names[-1]}:
        case = next(c for c in _cases(spec) if c.name == name)
        words = shlex.split(rerun_command(case, spec))
        assert words[:2] == ["strata-bench", "parity"]
        assert _listed(words[2:]) == [name], words


def _cases(spec):
    from strata_bench.runs.prepare import prepare

    return prepare(spec).cases


def _registry_state():
    from strata_bench.cases import FAMILIES

    return {name: (id(f), f.variants, f.sources, dict(f.__dict__)) for name, f in FAMILIES.items()}


def test_no_run_changes_the_global_registry(ggml_tree):
    from strata_bench.families import load_builtin_families

    load_builtin_families()
    before = _registry_state()
    for args in ROUND_TRIPS:
        _listed([a.replace("{ggml}", ggml_tree) for a in args])
    assert _registry_state() == before
