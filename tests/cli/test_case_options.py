"""--shape, --cols, --fixtures (and --list) on parity, bench and ab: the cases they list, and bad input as
one line, exit 2."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli


def _run(args):
    return CliRunner().invoke(cli, args)


@pytest.mark.parametrize("command", [["parity"], ["bench"], ["ab", "--a", "old", "--b", "new"]])
def test_shape_and_cols_list(command):
    res = _run([*command, "--list", "--family", "mmvq", "--format", "iq2_s", "--shape", "131072x8192",
                "--cols", "1,8"])
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[:2] == ["mmvq/iq2_s/131072x8192/n1/seed:1", "mmvq/iq2_s/131072x8192/n8/seed:1"]
    assert all("/131072x8192/n1/" in n or "/131072x8192/n8/" in n for n in res.stdout.splitlines())


def test_parity_shape_list_is_the_bench_sweep_of_parity_defaults():
    res = _run(["parity", "--list", "--family", "q2warp", "--shape", "12288x2560"])
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == [f"q2warp/q2_0/12288x2560/n{n}/{d}" for n, d in (
        (1, "seed:1"), (2, "seed:1"), (3, "seed:1"), (4, "seed:1"), (1, "seed:2"), (2, "seed:2"), (3, "seed:2"),
        (4, "seed:2"), (4, "edge:3"), (3, "seed:4"), (2, "seed:5"), (1, "edge:6"))]
    # The fixture case's real rows keep their own shape: left out, in one line.
    assert res.stderr.splitlines()[0] == ("--shape 12288x2560: 1 fixture case left out (real weights keep their "
                                          "own shape: --fixtures with --cols runs them)")


@pytest.mark.parametrize("args,line", [
    (["parity", "--list", "--family", "mmvq", "--shape", "64x100"],
     "--shape 64x100: iq2_xxs takes rows of a multiple of 256 inputs, 100 is not (family mmvq)"),
    (["parity", "--list", "--shape", "64"], "--shape must be ROWSxCOLS, got '64'"),
    (["bench", "--list", "--cols", "0"], "--cols must be positive integers, got '0'"),
    (["parity", "--list", "--fixtures", "nope*"], None),
    (["parity", "--list", "--tensor", "blk"], "--tensor needs --gguf FILE"),
    (["ab", "--list", "--a", "x", "--b", "y"], "--list applies to kernel variants: add --family NAME"),
    (["ab", "--a", "x", "--b", "y", "--cols", "1,8"], "--cols applies to kernel variants: add --family NAME"),
    (["ab", "--a", "x", "--b", "y", "--variants", "v.toml"], "--variants applies to kernel variants: add --family NAME"),
])
def test_bad_case_options_one_line_exit_2(args, line):
    res = _run(args)
    assert res.exit_code == 2
    lines = res.stderr.splitlines()
    assert len(lines) == 1
    if line is None:
        assert lines[0].startswith("--fixtures 'nope*' matches no fixture in ")
    else:
        assert lines == [line]


def test_fixtures_glob_lists_every_family_that_takes_them():
    res = _run(["parity", "--list", "--fixtures", "smollm2-ffn_down.iq2_s", "--fixtures", "smollm2-token_embd*",
                "--cols", "4"])
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == [
        "dequant/iq2_s/64x1536/n1/fixture:smollm2-ffn_down.iq2_s",
        "mmvq/iq2_s/64x1536/n4/fixture:smollm2-ffn_down.iq2_s",
        "pfgemm/iq2_s/256x1536/n150/fixture:smollm2-ffn_down.iq2_s/groups=0,1,15,16,17,33,64,4",
        "dequant/q8_0/64x576/n1/fixture:smollm2-token_embd.q8_0",
        "fp16deq/q8_0/64x576/n1/fixture:smollm2-token_embd.q8_0/path=vec16",
        "mmvq/q8_0/64x576/n4/fixture:smollm2-token_embd.q8_0",
        "q2warp/q2_0/64x576/n4/fixture:smollm2-token_embd.q8_0",
    ]


def test_fixture_no_family_takes_is_one_line():
    res = _run(["bench", "--list", "--fixtures", "smollm2-ffn_down.q[36]_k", "--fixtures", "smollm2-ffn_down.q8_0",
                "--family", "dequant"])
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == ["dequant/q8_0/64x1536/n1/fixture:smollm2-ffn_down.q8_0"]
    assert res.stderr.splitlines() == [
        "fixture smollm2-ffn_down.q3_k (q3_k): no selected family takes q3_k (families: dequant)",
        "fixture smollm2-ffn_down.q6_k (q6_k): no selected family takes q6_k (families: dequant)"]


OTHER_GGUF = "tests/data/gguf/other-rows.gguf"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    from strata_bench.kernels.sources import REPO_ROOT

    monkeypatch.chdir(REPO_ROOT)
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("command", [["parity"], ["bench"], ["ab", "--a", "old", "--b", "new"]])
def test_gguf_rows_list_every_family_that_takes_their_type(cache, command):
    res = _run([*command, "--list", "--gguf", OTHER_GGUF, "--tensor", r"blk\.0\.ffn_(gate|down)", "--rows", "8:40",
                "--cols", "1,4", "--family", "mmvq,dequant,q2warp"])
    assert res.exit_code == 0, res.output
    gate, down = (f"fixture:gguf-98ce7b4927f1-blk.0.ffn_{t}.weight-r8-40" for t in ("gate", "down"))
    assert res.stdout.splitlines() == [
        f"dequant/iq3_s/32x2560/n1/{gate}", f"mmvq/iq3_s/32x2560/n1/{gate}", f"mmvq/iq3_s/32x2560/n4/{gate}",
        f"dequant/q8_0/32x1024/n1/{down}", f"mmvq/q8_0/32x1024/n1/{down}", f"mmvq/q8_0/32x1024/n4/{down}",
        f"q2warp/q2_0/32x1024/n1/{down}", f"q2warp/q2_0/32x1024/n4/{down}"]


@pytest.mark.parametrize("args,line", [
    (["--tensor", "nothing"], "--tensor 'nothing' matches no tensor in other-rows.gguf (tensors: "
                              "blk.0.ffn_gate.weight, blk.0.ffn_up.weight, blk.0.ffn_down.weight, "
                              "blk.1.ffn_down.weight, blk.1.ffn_gate_exps.weight, blk.0.attn_norm.weight, ...)"),
    (["--tensor", "ffn_up", "--rows", "0:99"], "--rows 0:99 is past the end of blk.0.ffn_up.weight (72 rows)"),
    (["--tensor", "ffn_up", "--rows", "5:2"], "reversed row range 5:2: need 0 <= A < B"),
])
def test_gguf_bad_input_one_line_nothing_cached(cache, args, line):
    res = _run(["parity", "--list", "--gguf", OTHER_GGUF, *args])
    assert res.exit_code == 2
    assert res.stderr.splitlines() == [line]
    assert not cache.exists()


EXAMPLE_TOML = "examples/toml_variant/variants.toml"


@pytest.fixture
def toml_cleanup(monkeypatch):
    """In the checkout (the example's relative paths); a command's variants stay in its own catalog."""
    from strata_bench.kernels.sources import REPO_ROOT

    monkeypatch.chdir(REPO_ROOT)


def test_variants_list_parity_bench_ab(toml_cleanup):
    res = _run(["parity", "--list", "--variants", EXAMPLE_TOML, "--family", "mmvq"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert len(lines) == 334 and all(line.endswith("  variants=old,new,row8") for line in lines)
    assert lines[0] == "mmvq/iq2_xxs/8192x2560/n1/seed:1  variants=old,new,row8"
    res = _run(["bench", "--list", "--variants", EXAMPLE_TOML, "--family", "mmvq", "--format", "iq3_s,q8_0",
                "--shape", "131072x8192", "--cols", "1,8"])
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == [f"mmvq/{f}/131072x8192/n{n}/seed:1  variants=old,new,row8"
                                       for f in ("iq3_s", "q8_0") for n in (1, 8)]
    res = _run(["ab", "--list", "--family", "mmvq", "--variants", EXAMPLE_TOML, "--a", "old", "--b", "row8",
                "--fixtures", "smollm2-ffn_down.q8_0", "--cols", "8"])
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == ["mmvq/q8_0/64x1536/n8/fixture:smollm2-ffn_down.q8_0  variants=old,new,row8"]


def test_bad_variants_file_is_one_line(toml_cleanup, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[[variant]\n")
    res = _run(["parity", "--list", "--variants", str(bad)])
    assert res.exit_code == 2
    (line,) = res.stderr.splitlines()
    assert line.startswith(f"{bad}: TOML syntax error: ")


@pytest.mark.slow  # about 35 s on 2 cores: all of mmvq's sources for sm_90 into an empty cache
@pytest.mark.nvrtc
def test_compile_variants_for_sm90(toml_cleanup, cubin_cache):
    res = _run(["compile", "--variants", EXAMPLE_TOML, "--arch", "90", "--family", "mmvq", "--resources"])
    assert res.exit_code == 0, res.output
    assert "mmvq_row8<siq::fmt_iq3_s>" in res.stdout
    # q8_1.cu, mmvq.cu's 55 kernels as 7 programs of at most 8, mmvq_mma.cu's 10 as 2, mmvq_onecol.cu's 2 as 1,
    # the TOML source's 11 as 2
    assert res.stdout.splitlines()[-1] == "13 compile(s): 13 ok (0 cached), 0 failed"
    assert "mmvq:mmvq/mmvq.cu [7/7]" in res.stdout and "[8/7]" not in res.stdout


@pytest.mark.gpu
def test_parity_gguf_report_names_the_rows(cache, tmp_path):
    import json

    res = _run(["parity", "--gguf", OTHER_GGUF, "--tensor", r"blk\.0\.ffn_down", "--rows", "0:32",
                "--family", "dequant", "-o", "md", "--results", str(tmp_path / "results"), "-q"])
    assert res.exit_code == 0, res.output
    row = ("| `gguf-98ce7b4927f1-blk.0.ffn_down.weight-r0-32` | `other-rows.gguf` | `98ce7b4927f1` | "
           "`blk.0.ffn_down.weight` | `0:32` |")
    assert row in res.stdout.splitlines()
    (summary,) = (tmp_path / "results").rglob("parity-*.json")
    assert json.loads(summary.read_text())["summary"]["fixtures"] == [{
        "fixture": "gguf-98ce7b4927f1-blk.0.ffn_down.weight-r0-32", "file": "other-rows.gguf",
        "sha256": "98ce7b4927f1", "tensor": "blk.0.ffn_down.weight", "rows": "0:32", "kind": "gguf"}]
