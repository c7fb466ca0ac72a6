"""--ggml and --ggml-b on parity, bench and ab over a written ggml tree (no nvcc, no GPU): the variants each
case lists, and bad input as one line, exit 2."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli
from tests.ggml_trees import write_fake_tree

FAMILIES = "mmvq,dequant,q8_1"


@pytest.fixture
def tree(tmp_path):
    """A ggml tree of q8_0, q4_k, iq2_xxs, iq3_s and iq1_s: the checkout tmp_path/llama.cpp."""
    write_fake_tree(tmp_path / "llama.cpp" / "ggml")
    return tmp_path / "llama.cpp"


def _run(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert not (result.exception and not isinstance(result.exception, SystemExit)), result.exception
    return result


def test_q2warp_is_said_to_have_no_ggml_counterpart(tree):
    result = _run("parity", "--ggml", tree, "--family", "q2warp", "--list")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == ("--ggml: q2warp has no ggml counterpart (ggml's Q2_0, type 42, is "
                                             "another format than this project's q2_0): its cases run the built-ins "
                                             "alone")
    assert all("ggml" not in line for line in result.stdout.splitlines())


def _listed(result):
    assert result.exit_code == 0, result.output
    return dict(line.split("  variants=") for line in result.stdout.splitlines())


def test_parity_list_shows_ggml_beside_the_built_ins(tree):
    listed = _listed(_run("parity", "--ggml", tree, "--family", FAMILIES, "--list"))
    assert listed["mmvq/iq2_xxs/8192x2560/n1/seed:1"] == "old,new,ggml"
    assert listed["mmvq/q8_0/8192x2560/n8/seed:1"] == "old,new,ggml"
    assert listed["mmvq/q8_0/8192x2560/n11/seed:1"] == "old,new"  # 11 columns: not ggml's mat-vec
    assert listed["mmvq/iq2_xs/8192x2560/n1/seed:1"] == "old,new"  # a format the tree does not declare
    q4_k = {name: v for name, v in listed.items() if name.startswith("mmvq/q4_k/")}
    assert "mmvq/q4_k/67x2048/n5/seed:1" in q4_k and set(q4_k.values()) == {"ggml"}  # ggml alone
    assert listed["dequant/iq2_xxs/1024x2560/n1/seed:1"] == "dequant,ggml"
    assert listed["dequant/iq2_xs/1024x2560/n1/seed:1"] == "dequant"
    assert listed["dequant/q4_k/9x256/n1/seed:1"] == "ggml"  # a format dequant lacks: ggml alone
    q8_1 = {name: v for name, v in listed.items() if name.startswith("q8_1/")}
    assert q8_1 and set(q8_1.values()) == {"q8_1,ggml"}


@pytest.mark.parametrize("command", [["parity"], ["bench"], ["ab", "--a", "old", "--b", "ggml"]])
def test_ggml_b_joins_every_case_ggml_runs(tree, tmp_path, command):
    write_fake_tree(tmp_path / "branch" / "ggml")
    one = _listed(_run(*command, "--ggml", tree, "--family", FAMILIES, "--list"))
    both = _listed(_run(*command, "--ggml", tree, "--ggml-b", tmp_path / "branch", "--family", FAMILIES, "--list"))
    assert one.keys() == both.keys()
    assert both == {name: v + ",ggml_b" if "ggml" in v.split(",") else v for name, v in one.items()}
    assert any(v.endswith(",ggml,ggml_b") for v in both.values())


@pytest.mark.parametrize("args,line", [
    (["--ggml-b", "{tree}"], "--ggml-b {tree} needs --ggml PATH, the tree it is held to"),
    (["--ggml", "{tree}", "--cols", "9"],
     "--cols 9: ggml's mul_mat_vec_q takes 1 to 8 columns (MMVQ_MAX_BATCH_SIZE; above it ggml uses another kernel)"),
    (["--ggml", "{tree}", "--format", "q2_0"],
     "--format q2_0: ggml has no q2_0 kernels here (ggml 0.9.4: q8_0, q4_k, iq2_xxs, iq3_s, iq1_s)"),
    (["--ggml", "{tree}", "--format", "iq4_xs"],  # a type id, but no QR or VDR
     "--format iq4_xs: ggml has no iq4_xs kernels here (ggml 0.9.4: q8_0, q4_k, iq2_xxs, iq3_s, iq1_s)"),
    (["--ggml", "{tmp}/nope"], "--ggml {tmp}/nope: no such directory"),
    (["--ggml", "{tmp}"], "--ggml {tmp}: not a ggml tree (no src/ggml-cuda/mmvq.cu in it or in its ggml/ folder)"),
    (["--ggml", "{tree}", "--ggml-b", "{tmp}"],
     "--ggml-b {tmp}: not a ggml tree (no src/ggml-cuda/mmvq.cu in it or in its ggml/ folder)"),
])
@pytest.mark.parametrize("command", [["parity"], ["bench"], ["ab", "--a", "old", "--b", "ggml"]])
def test_bad_ggml_input_is_one_line_exit_2(tree, tmp_path, command, args, line):
    args = [a.format(tree=tree, tmp=tmp_path) for a in args]
    result = _run(*command, "--list", "--family", FAMILIES, *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [line.format(tree=tree, tmp=tmp_path)]
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", [["parity"], ["bench"], ["ab", "--a", "old", "--b", "ggml"]])
def test_an_absurd_number_in_the_tree_is_one_line_exit_2(tree, tmp_path, command):
    header = tree / "ggml/src/ggml-cuda/vecdotq.cuh"
    header.write_text(header.read_text().replace("VDR_IQ2_XXS_Q8_1_MMVQ 2", "VDR_IQ2_XXS_Q8_1_MMVQ " + "7" * 5000))
    result = _run(*command, "--list", "--family", FAMILIES, "--ggml", tree)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [f"--ggml {(tree / 'ggml').resolve()}: src/ggml-cuda/vecdotq.cuh: "
                                          "VDR_IQ2_XXS_Q8_1_MMVQ is an integer of 5000 digits, not in 1..64"]
    assert "Traceback" not in result.output and list(tmp_path.glob("**/*.json*")) == []


def test_fp16deq_lists_ggml_on_its_contiguous_cases_in_parity_and_bench(tree):
    parity = _listed(_run("parity", "--ggml", tree, "--family", "fp16deq", "--list"))
    assert parity["fp16deq/q8_0/50x1056/n1/seed:3/row0=37/of=128/path=vec16"] == "old,new,ggml"
    assert parity["fp16deq/q8_0/40x2048/n1/seed:4/ld=2056/path=vec16"] == "old,new"  # padded output rows
    assert parity["fp16deq/iq4_xs/96x4096/n1/seed:1/path=vec16"] == "old,new"  # the fake tree has no iq4_xs
    bench = _listed(_run("bench", "--ggml", tree, "--family", "fp16deq", "--list"))
    assert bench["fp16deq/q8_0/8192x8192/n1/seed:1/path=vec16"] == "old,new,ggml"


def _without_to_fp16_q8_0(tree):
    """The tree's convert.cu as an older ggml's: no dequantize_block_q8_0_f16."""
    convert = tree / "ggml/src/ggml-cuda/convert.cu"
    convert.write_text(convert.read_text().replace("dequantize_block_q8_0_f16(", "dequantize_block_q8_0_f17("))
    return "src/ggml-cuda/convert.cu has no __global__ kernel dequantize_block_q8_0_f16 (an unsupported ggml version?)"


@pytest.mark.parametrize("command", [["parity"], ["bench"]])
def test_a_tree_lacking_a_familys_kernel_refuses_that_family_alone(tree, command):
    why = _without_to_fp16_q8_0(tree)
    root = (tree / "ggml").resolve()
    refused = _run(*command, "--ggml", tree, "--family", "mmvq,fp16deq", "--list")
    assert refused.exit_code == 2, refused.output
    assert refused.stderr.splitlines() == [f"--ggml {root}: {why}: fp16deq needs it"]
    others = _listed(_run(*command, "--ggml", tree, "--family", "mmvq", "--list"))
    assert any(v.endswith(",ggml") for v in others.values())
    every = _run(*command, "--ggml", tree, "--list")
    assert f"--ggml {root}: {why}: fp16deq needs it, so fp16deq runs without this tree" in every.stderr.splitlines()
    listed = _listed(every)
    assert all(v == "old,new" for name, v in listed.items() if name.startswith("fp16deq/"))
    assert any(v.endswith(",ggml") for name, v in listed.items() if name.startswith("mmvq/"))


def test_a_changed_signature_names_the_kernels_parameters(tree):
    convert = tree / "ggml/src/ggml-cuda/convert.cu"
    convert.write_text(convert.read_text().replace("half * __restrict__ y, const int64_t k", "half * __restrict__ y, const int k"))
    result = _run("parity", "--ggml", tree, "--family", "fp16deq", "--list")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"--ggml {(tree / 'ggml').resolve()}: src/ggml-cuda/convert.cu: dequantize_block_q8_0_f16's parameters "
        f"changed (an unsupported ggml version): (const void * __restrict__ vx, half * __restrict__ y, const int k): "
        f"fp16deq needs it"]


def test_a_branch_lacking_the_kernel_is_named_as_ggml_b(tree, tmp_path):
    branch = write_fake_tree(tmp_path / "branch" / "ggml").parent
    why = _without_to_fp16_q8_0(branch)
    result = _run("parity", "--ggml", tree, "--ggml-b", branch, "--family", "fp16deq", "--list")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"--ggml-b {(branch / 'ggml').resolve()}: {why}: fp16deq needs it"]


def test_grouped_lists_ggml_where_the_tree_has_the_gate_and_down_formats(tree):
    from tests.ggml_trees import with_iq4_nl

    with_iq4_nl(tree / "ggml")
    parity = _listed(_run("parity", "--ggml", tree, "--family", "grouped", "--list"))
    on = {name.split("/")[1] + "/" + name.split("/")[5] for name, v in parity.items() if v == "old,new,ggml"}
    assert on == {"iq2_xxs/down=iq4_nl", "iq3_s/down=iq4_nl"}
    assert set(parity.values()) == {"old,new", "old,new,ggml"}
    bench = _listed(_run("bench", "--ggml", tree, "--family", "grouped", "--list"))
    assert [n for n, v in bench.items() if v == "old,new,ggml"] == [
        "grouped/iq2_xxs/14336x4096/n64/seed:1/down=iq4_nl/groups=8-8-8-8-8-8-8-8",
        "grouped/iq2_xxs/14336x4096/n256/seed:1/down=iq4_nl/groups=32-32-32-32-32-32-32-32"]


def test_a_tree_whose_fusion_struct_changed_refuses_grouped_alone(tree):
    common = tree / "ggml/src/ggml-cuda/common.cuh"
    common.write_text(common.read_text().replace("float glu_limit", "double glu_limit"))
    line = (f"--ggml {(tree / 'ggml').resolve()}: src/ggml-cuda/common.cuh: ggml_cuda_mm_fusion_args_device is not "
            f"the struct mul_mat_vec_q's fused launch passes: grouped needs it")
    refused = _run("parity", "--ggml", tree, "--family", "grouped", "--list")
    assert (refused.exit_code, refused.stderr.splitlines()) == (2, [line])
    assert _listed(_run("parity", "--ggml", tree, "--family", "fp16deq,mmvq", "--list"))


@pytest.mark.parametrize("family,said", [("q2warp", True), ("q8_1", False)])
def test_compile_says_q2warp_has_no_counterpart_only_where_it_is_selected(tree, tmp_path, monkeypatch, family, said):
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path / "cache"))
    result = _run("compile", "--ggml", tree, "--family", family, "--arch", "90")
    assert ("q2warp has no ggml counterpart" in result.stderr) is said, result.stderr


@pytest.mark.parametrize("command", [["parity"], ["bench"]])
def test_the_fusion_families_list_ggml_and_ggml_b(tree, tmp_path, command):
    write_fake_tree(tmp_path / "branch" / "ggml")
    listed = _listed(_run(*command, "--ggml", tree, "--ggml-b", tmp_path / "branch", "--family",
                          "swiglu_q8,moe_combine", "--list"))
    assert listed and set(listed.values()) == {"old,new,ggml,ggml_b"}
    assert any(n.startswith("swiglu_q8/") for n in listed) and any(n.startswith("moe_combine/") for n in listed)


@pytest.mark.parametrize("family,where,old,why", [
    ("swiglu_q8", "src/ggml-cuda/unary.cu", "unary_gated_op_kernel(", "src/ggml-cuda/unary.cu has no __global__ "
     "kernel unary_gated_op_kernel (an unsupported ggml version?)"),
    ("moe_combine", "src/ggml-cuda/moe-weighted-reduction.cu", "moe_weighted_reduction_f32(",
     "src/ggml-cuda/moe-weighted-reduction.cu has no __global__ kernel moe_weighted_reduction_f32 (an unsupported "
     "ggml version?)"),
])
def test_a_tree_lacking_a_fusion_kernel_refuses_that_family_alone(tree, family, where, old, why):
    path = tree / "ggml" / where
    path.write_text(path.read_text().replace(old, "renamed("))
    root = (tree / "ggml").resolve()
    refused = _run("parity", "--ggml", tree, "--family", f"q8_1,{family}", "--list")
    assert (refused.exit_code, refused.stderr.splitlines()) == (2, [f"--ggml {root}: {why}: {family} needs it"])
    other = "moe_combine" if family == "swiglu_q8" else "swiglu_q8"
    assert set(_listed(_run("parity", "--ggml", tree, "--family", other, "--list")).values()) == {"old,new,ggml"}


def test_a_branch_changing_the_bounded_arithmetic_is_held_to_ggmls_bits_not_refused(tree, tmp_path):
    """The suite's planted change (gpu_suite.sh, ggml-fuse-b-planted): as --ggml-b it is what the bitwise check
    catches; as --ggml, the tree the error model would judge, it is refused."""
    branch = write_fake_tree(tmp_path / "branch" / "ggml")
    reduction = branch / "src/ggml-cuda/moe-weighted-reduction.cu"
    line = "sum += (experts[row * n_embd + col] * scale) * weights[row];"
    reduction.write_text(reduction.read_text().replace(line, line[:-1] + " * 1.0001f;"))
    listed = _listed(_run("parity", "--ggml", tree, "--ggml-b", branch.parent, "--family", "moe_combine", "--list"))
    assert set(listed.values()) == {"old,new,ggml,ggml_b"}
    refused = _run("parity", "--ggml", branch.parent, "--family", "moe_combine", "--list")
    assert refused.exit_code == 2 and refused.stderr.splitlines() == [
        f"--ggml {branch.resolve()}: src/ggml-cuda/moe-weighted-reduction.cu has no `{line}`, which moe_combine's "
        f"error model bounds (an unsupported ggml version?): moe_combine needs it"]


MMQ_FORMATS = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq1_s", "iq2_xxs",
               "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_nl", "iq4_xs")  # every format family mmq runs


@pytest.mark.parametrize("formats,built", [
    ((), {f"mmq-instance-{fmt}.cu" for fmt in MMQ_FORMATS} | {"quantize.cu"}),
    (("--format", "q8_0"), {"mmq-instance-q8_0.cu", "quantize.cu"}),
    (("--format", "q4_k,iq2_xxs"), {"mmq-instance-q4_k.cu", "mmq-instance-iq2_xxs.cu", "quantize.cu"}),
])
def test_compile_builds_only_the_mmq_instances_of_its_formats(monkeypatch, formats, built):
    """compile takes --format as the run commands do: mul_mat_q's instances are a source each (42-64 s of nvcc
    apiece on 2 cores), so a compile of one format builds that one's alone."""
    import strata_bench.cli.compile as compile_cmd
    from tests.ggml_trees import pinned_sdist_tree, Unavailable

    try:
        ggml = pinned_sdist_tree()
    except Unavailable as exc:
        pytest.skip(str(exc))
    planned = []
    monkeypatch.setattr(compile_cmd, "_run_with_progress", lambda jobs, *a: planned.extend(jobs) or [])
    result = _run("compile", "--ggml", ggml, "--family", "mmq", *formats, "--arch", "90")
    assert result.exit_code == 0, result.output
    assert {job.source.split("@")[0].rsplit("/", 1)[-1] for job in planned} == built
