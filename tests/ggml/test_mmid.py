"""pfgemm's variant ggml (ggml/mmid.py, mmq_variants.py) on the CPU, with the pinned tree: ggml's MUL_MAT_ID on
mul_mat_q for pfgemm's cases, as ggml_cuda_mul_mat_q launches it on sm_90 (the ids helper, the gathered
quantization, mul_mat_q over the experts as channels and, where stream-k needs it, its fixup): every launch
argument, the tile config, the ids and maps ggml builds, the weights a K tile reads past, which cases it runs,
and a tree lacking mmid.cu's helper, which refuses pfgemm alone. The NVRTC compile of mmid.cu is marked nvrtc."""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli
from strata_bench.families import load_builtin_families
from strata_bench.families.pfgemm_groups import group_sizes
from strata_bench.ggml import mmid, mmq, mmq_variants
from strata_bench.ggml.tree import QUANTIZE, locate

H100_OPTIN, H100_SMS = 232448, 132  # sharedMemPerBlockOptin and SMs of an H100 SXM (sm_90)
PFGEMM = load_builtin_families()["pfgemm"]
BUFS = {k: k.upper() for k in ("ids", "ids_src1", "ids_dst", "bounds", "xq", "tmp")}


@pytest.fixture(scope="module")
def tree(real_tree):
    return locate(real_tree)


def _case(fmt, n, k, groups):
    return PFGEMM.expert_case(fmt, n, k, groups)


def _plan(tree, case):
    shape = mmq_variants.experts_of(case)
    cfg = mmq.choose(mmq.config_table(tree), case.fmt, case.rows, case.ncols, H100_OPTIN)
    steps = list(mmid.plan(tree, cfg, case.fmt, shape, H100_SMS, "W", "X", BUFS, "Y"))
    return cfg, shape, [(source.rsplit("/", 1)[-1], step) for source, step in steps]


def _values(launch):
    return {p.label: p.value for p in launch.params}


def test_the_launches_of_an_iq4_nl_case_without_fixup(tree):
    case = _case("iq4_nl", 1280, 2560, "70,0,3,129,0,16,48,1")  # 267 tokens over 8 experts
    cfg, shape, steps = _plan(tree, case)
    assert (shape.tokens, shape.experts, shape.block_values) == (267, 8, 32)
    assert [(s, step.kernel) for s, step in steps] == [
        ("mmid.cu", "mm_ids_helper<0>"), ("quantize.cu", "quantize_mmq_q8_1<(mmq_q8_1_ds_layout)0, false>"),
        ("mmq-instance-iq4_nl.cu", "mul_mat_q<(ggml_type)20, 96, false>")]  # J 96: the first of 3 column tiles
    (_, helper), (_, quantize), (_, main) = steps
    assert (helper.grid, helper.block, helper.shared) == ((8, 1, 1), (32, 1, 1), 267 * 4)
    assert list(_values(helper).values()) == ["IDS", "IDS_SRC1", "IDS_DST", "BOUNDS", 267, 1, 1, 1, 1, False]
    assert (quantize.grid, quantize.block) == ((267, 5, 1), (128, 1, 1))  # K 2560 padded to 5 x 512
    assert list(_values(quantize).values()) == ["X", "IDS_SRC1", "XQ", 2560, 2560, 2560, 2560 * 267, 2560, 267, 1, 0]
    # 10 row tiles x 3 column tiles x 8 experts = 240 tiles: 91% of two waves, a block a tile, no fixup
    assert mmq.stream_k_grid(cfg, shape.args(), H100_SMS) == mmq.Grid(240, 240, False)
    assert (main.grid, main.block, main.shared) == ((240, 1, 1), (32, 8, 1), 96 * 4 + 128 * 76 * 4 + 14336)
    v = _values(main)
    assert [v[k] for k in ("x", "y", "ids_dst", "expert_bounds", "dst", "tmp_fixup", "y_scale")] == \
        ["W", "XQ", "IDS_DST", "BOUNDS", "Y", 0, 0]
    assert [v[k] for k in ("nrows_x", "ncols_dst", "stride_row_x", "ncols_y", "stride_col_dst")] == \
        [1280, 267, 80, 267, 1280]
    assert [v[k][2] for k in ("blocks_per_ne00", "channel_ratio", "nchannels_y", "sample_ratio", "nsamples_y",
                              "ntx")] == [80, 1, 8, 1, 1, 3]
    assert [v[k] for k in ("stride_channel_x", "stride_channel_y", "stride_channel_dst", "stride_sample_x",
                           "stride_sample_y", "stride_sample_dst")] == \
        [1280 * 80, 2560 * 36 // 128, 1280, 8 * 1280 * 80, 267 * 720, 1280 * 267]


def test_an_iq2_s_case_takes_the_fixup_and_a_short_row_the_fallback(tree):
    cfg, shape, steps = _plan(tree, _case("iq2_s", 1280, 2560, "0,1,15,16,17,33,64,4"))
    assert (cfg.cols, cfg.sram_layout, cfg.fallback) == (80, "Q3_K", False)  # J 80: the first of 2 tiles for 150
    assert mmq.stream_k_grid(cfg, shape.args(), H100_SMS) == mmq.Grid(160, 132, True)  # 60% of 2 waves: an SM each
    (_, main), (_, fixup) = steps[2:]
    assert main.kernel == "mul_mat_q<(ggml_type)22, 80, false>" and _values(main)["tmp_fixup"] == "TMP"
    assert fixup.kernel == "mul_mat_q_stream_k_fixup<(ggml_type)22, 80, false>"
    assert (fixup.grid, fixup.block) == ((132, 4, 1), (32, 4, 1))
    f = _values(fixup)
    assert [f[k] for k in ("ids_dst", "expert_bounds", "dst", "tmp_last_tile", "nrows_x", "ncols_dst",
                           "stride_col_dst", "stride_channel_dst", "stride_sample_dst")] == \
        ["IDS_DST", "BOUNDS", "Y", "TMP", 1280, 150, 1280, 1280, 1280 * 150]
    assert [f[k][2] for k in ("blocks_per_ne00", "nchannels_y", "nsamples_y", "ntx")] == [10, 8, 1, 2]
    assert mmq.fixup_floats(cfg, mmq.stream_k_grid(cfg, shape.args(), H100_SMS)) == 132 * 80 * 128
    cfg, _, steps = _plan(tree, _case("iq4_nl", 144, 512, "0,1,15,16,17,33,64,4"))  # 144 % 128: fallback
    assert steps[2][1].kernel == "mul_mat_q<(ggml_type)20, 128, true>" and cfg.fallback


def _mm_ids_helper(ids, experts):
    """mmid.cu's generic path (n_expert_used 1, ne11 1, sis1 1), read as written: per expert, its tokens in
    order; ids_src1 the token's src1 row, ids_dst its dst column, expert_bounds each expert's first column."""
    src1, dst, bounds = [], [], []
    for expert in range(experts):
        bounds.append(len(dst))
        for it, used in enumerate(ids):
            if used == expert:
                src1.append(it * 1 + 0 % 1)
                dst.append(it * 1 + 0)
    return np.array(src1), np.array(dst), np.array(bounds + [len(dst)])


def test_the_ids_ggml_builds_for_tokens_sorted_by_expert():
    case = _case("iq4_nl", 256, 512, "70,0,3,129,0,16,48,1")
    sizes = group_sizes(case)
    ids = mmid.expert_ids(sizes)
    assert ids.dtype == np.int32 and ids.shape == (267,)
    assert list(np.unique(ids, return_counts=True)[1]) == [70, 3, 129, 16, 48, 1]
    src1, dst, bounds = _mm_ids_helper(ids, len(sizes))
    np.testing.assert_array_equal(src1, np.arange(267))  # sorted tokens: both maps are the identity
    np.testing.assert_array_equal(dst, np.arange(267))
    np.testing.assert_array_equal(bounds, np.concatenate([[0], np.cumsum(sizes)]))  # pfgemm's offsets
    assert mmid.ids_dst_ints(267) == 267 + 128


@pytest.mark.parametrize("fmt,n,k,extra", [
    ("iq4_nl", 2560, 640, 1),   # 20 blocks a row, tiles of 8: the last tile reads 4 blocks past the row
    ("iq4_nl", 256, 608, 1),    # 19 blocks: 5 past
    ("iq4_nl", 144, 512, 0),    # 16 blocks: whole tiles
    ("iq2_s", 1280, 2560, 0),   # a tile is one 256-value block
])
def test_a_k_tile_past_the_last_row_reads_zero_rows(tree, fmt, n, k, extra):
    case = _case(fmt, n, k, "0,1,15,16,17,33,64,4")
    shape = mmq_variants.experts_of(case)
    cfg = mmq.choose(mmq.config_table(tree), fmt, n, case.ncols, H100_OPTIN)
    assert mmid.readable_rows(cfg, shape) == 8 * n + extra


def test_the_variant_runs_every_iq2_s_and_iq4_nl_case_and_builds_the_formats_selected(tree):
    catalog = {"pfgemm": PFGEMM.copy()}
    assert mmq_variants.attach(catalog, tree, "ggml", None, ()) == {}
    assert "mmq" in catalog
    family = catalog["pfgemm"]
    variant = family.variant("ggml")
    assert variant.formats == ("iq2_s", "iq4_nl") and variant.error_model.formats == ("iq2_s", "iq4_nl")
    assert variant.description == "llama.cpp's mul_mat_q with expert ids (MUL_MAT_ID), ggml 0.25.3"
    listed = {c.name: c.variants for c in family.default_cases()}
    assert {n.split("/")[1] for n, v in listed.items() if "ggml" in v} == {"iq2_s", "iq4_nl"}
    assert all(v[-1] == "ggml" for n, v in listed.items() if "/q2_0/" not in n)
    assert all("ggml" not in v for n, v in listed.items() if "/q2_0/" in n)
    assert listed["pfgemm/iq4_nl/256x608/n267/seed:6/groups=70,0,3,129,0,16,48,1"] == ("old", "auto", "ggml")
    units = {u.rsplit("/", 1)[-1]: u for u in family.sources if u.endswith("@ggml") or u.endswith("@ggml-mmq")}
    assert sorted(units) == ["mmid.cu@ggml", "mmq-instance-iq2_s.cu@ggml", "mmq-instance-iq4_nl.cu@ggml",
                             "quantize.cu@ggml-mmq"]
    assert variant.kernels(family, units["mmid.cu@ggml"]) == ["mm_ids_helper<0>"]
    assert variant.kernels(family, units["quantize.cu@ggml-mmq"]) == ["quantize_mmq_q8_1<(mmq_q8_1_ds_layout)0, false>"]
    instance = variant.kernels(family, units["mmq-instance-iq4_nl.cu@ggml"])
    assert "mul_mat_q<(ggml_type)20, 96, false>" in instance and len(instance) == 2 * (11 + 5)
    assert variant.kernels(family, family.sources[0]) == []  # pfgemm_old.cu: nothing of ggml's
    for unit in units.values():  # and the built-ins nothing of theirs from ggml's sources
        assert family.name_expressions(unit) == variant.kernels(family, unit)
    narrowed = {"pfgemm": PFGEMM.copy()}
    mmq_variants.attach(narrowed, tree, "ggml", None, ("iq4_nl",))
    assert not any("iq2_s" in s for s in narrowed["pfgemm"].sources)  # only the selected format's instance
    assert str(tree.path(QUANTIZE)) + "@ggml-mmq" in narrowed["pfgemm"].sources


def _without_mmid_helper(real_tree, tmp_path):
    """The pinned tree as links, but mmid.cu's helper renamed: a tree without MUL_MAT_ID's helper."""
    root = tmp_path / "ggml"

    def mirror(src, dst, keep):  # links to every entry but those on the way to mmid.cu
        dst.mkdir(parents=True)
        for entry in src.iterdir():
            if entry.name != keep[0]:
                (dst / entry.name).symlink_to(entry)
            elif len(keep) > 1:
                mirror(entry, dst / entry.name, keep[1:])

    mirror(real_tree, root, mmid.SOURCE.split("/"))
    text = (real_tree / mmid.SOURCE).read_text()
    (root / mmid.SOURCE).write_text(text.replace("void mm_ids_helper(", "void mm_ids_helper_v2("))
    return root


def test_a_tree_lacking_mmids_helper_refuses_pfgemm_alone(real_tree, tmp_path):
    root = _without_mmid_helper(real_tree, tmp_path)
    line = (f"--ggml {root.resolve()}: src/ggml-cuda/mmid.cu has no __global__ kernel mm_ids_helper (an unsupported "
            f"ggml version?)")
    refused = CliRunner().invoke(cli, ["parity", "--ggml", str(root), "--family", "pfgemm", "--list"])
    assert (refused.exit_code, refused.stderr.splitlines()) == (2, [f"{line}: pfgemm needs it"])
    mmq_only = CliRunner().invoke(cli, ["parity", "--ggml", str(root), "--family", "mmq", "--list"])
    assert mmq_only.exit_code == 0 and "variants=ggml" in mmq_only.stdout
    every = CliRunner().invoke(cli, ["parity", "--ggml", str(root), "--family", "pfgemm,mmvq,mmq", "--list"])
    assert every.exit_code == 2  # pfgemm is named: refused
    unnamed = CliRunner().invoke(cli, ["parity", "--ggml", str(root), "--list", "-k", "^pfgemm/iq4_nl"])
    assert unnamed.exit_code == 0, unnamed.output
    assert f"{line}: pfgemm needs it, so pfgemm runs without this tree" in unnamed.stderr.splitlines()
    assert all(v.split("  variants=")[1] in ("old,new,auto", "old,auto") for v in unnamed.stdout.splitlines())


@pytest.mark.nvrtc
def test_mmids_helper_compiles_by_name_with_nvrtc(tree, monkeypatch, tmp_path):
    from tests.ggml.test_nvrtc_build import _nvrtc_or_skip
    from strata_bench.ggml import build
    from strata_bench.ggml.launch import checker

    _nvrtc_or_skip()
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(build.COMPILER_ENV, "nvrtc")
    spec = build.source_build(tree, mmid.SOURCE, "--ggml variant 'ggml'", checker(mmq_variants.signature, "ggml"))
    compiled = spec.compile("unit", [mmid.HELPER], "90", use_cache=False)  # its parameter table checked too (1 s)
    assert compiled.lowered[mmid.HELPER].startswith("_Z13mm_ids_helperILi0EEvPKiPiS2_S2_iiiiib")


def _listed(result):
    assert result.exit_code == 0, result.output
    return dict(line.split("  variants=") for line in result.stdout.splitlines())


Q2_0_LINE = ("--ggml: pfgemm's q2_0 cases have no ggml counterpart (ggml's Q2_0, type 42, is another format than "
             "this project's q2_0): they run the built-ins alone")


@pytest.mark.parametrize("command", [["parity"], ["bench"]])
def test_pfgemm_lists_ggml_on_the_formats_the_tree_has_and_says_q2_0_stays_with_the_built_ins(fake_tree, tmp_path,
                                                                                              command):
    from tests.ggml_trees import with_iq4_nl, write_fake_tree

    with_iq4_nl(fake_tree)
    result = CliRunner().invoke(cli, [*command, "--ggml", str(fake_tree), "--family", "pfgemm", "--list"])
    listed = _listed(result)
    assert result.stderr.splitlines()[0] == Q2_0_LINE
    ggml = {name.split("/")[1] for name, v in listed.items() if v.endswith(",ggml")}
    assert ggml == {"iq4_nl"}  # the fake tree has no iq2_s; q2_0 is not ggml's
    assert all(v.endswith(",ggml") for name, v in listed.items() if "/iq4_nl/" in name)
    branch = with_iq4_nl(write_fake_tree(tmp_path / "branch" / "ggml"))
    both = _listed(CliRunner().invoke(cli, [*command, "--ggml", str(fake_tree), "--ggml-b", str(branch),
                                            "--family", "pfgemm", "--list"]))
    assert both == {n: v + ",ggml_b" if v.endswith(",ggml") else v for n, v in listed.items()}


@pytest.mark.parametrize("args,said", [(["--family", "pfgemm", "--format", "iq4_nl"], False),
                                       (["--family", "mmvq"], False), (["--family", "pfgemm,q2warp"], True), ([], True)])
def test_the_q2_0_line_only_where_pfgemms_q2_0_cases_may_be_selected(fake_tree, args, said):
    from tests.ggml_trees import with_iq4_nl

    with_iq4_nl(fake_tree)
    result = CliRunner().invoke(cli, ["parity", "--ggml", str(fake_tree), *args, "--list"])
    assert result.exit_code == 0, result.output
    assert (Q2_0_LINE in result.stderr.splitlines()) is said


@pytest.fixture
def numpy_device(monkeypatch):
    """The variant's device calls on the host: numpy for cupy, an H100's SMs and shared memory, no opt-in."""
    import sys
    from types import SimpleNamespace

    from strata_bench.kernels import launch

    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(
        zeros=np.zeros, asarray=np.asarray, int32=np.int32, uint8=np.uint8, float32=np.float32))
    monkeypatch.setattr(launch, "shared_optin", lambda device=None: H100_OPTIN)
    monkeypatch.setattr(launch, "resident_sms", lambda device=None: H100_SMS)
    monkeypatch.setattr(launch, "allow_dynamic_shared", lambda fn, nbytes, static_bytes=0: None)


def test_prepare_and_launch_run_the_plan_from_each_kernels_own_unit(tree, numpy_device):
    catalog = {"pfgemm": PFGEMM.copy()}
    mmq_variants.attach(catalog, tree, "ggml", None, ())
    family = catalog["pfgemm"]
    variant = family.variant("ggml")
    case = _case("iq4_nl", 2560, 640, "0,1,15,16,17,33,64,4")  # a K tile past the last row: packed weights
    host = family.make_inputs(case)
    dev = {"x": host["x"], "w": host["w"], "offsets": host["offsets"]}
    made = variant.prepare(family, case, dev)
    assert sorted(made) == sorted(f"ggml_mmid_{k}" for k in (*mmq_variants.BUFFERS, "w"))
    assert made["ggml_mmid_w"].shape == (8 * 2560 + 1, 360) and not made["ggml_mmid_w"][-1].any()
    np.testing.assert_array_equal(made["ggml_mmid_w"][:-1], host["w"])
    assert made["ggml_mmid_x"].dtype == np.float32 and (made["ggml_mmid_x"] == host["x"]).all()
    np.testing.assert_array_equal(made["ggml_mmid_ids"], mmid.expert_ids(group_sizes(case)))
    assert made["ggml_mmid_ids_dst"].shape == (150 + 128,) and made["ggml_mmid_bounds"].shape == (9,)
    calls = []

    def in_source(unit, name):
        return lambda grid, block, args, shared_mem=0, stream=None: calls.append(
            (unit.rsplit("/", 1)[-1], name, grid, shared_mem, args))

    y = np.zeros((150, 2560), np.float32)
    variant.launch(family, case, SimpleKernels(in_source), {**dev, **made}, {"y": y})
    assert [c[:2] for c in calls] == [
        ("mmid.cu@ggml", "mm_ids_helper<0>"), ("quantize.cu@ggml-mmq", "quantize_mmq_q8_1<(mmq_q8_1_ds_layout)0, false>"),
        ("mmq-instance-iq4_nl.cu@ggml", "mul_mat_q<(ggml_type)20, 80, false>"),
        ("mmq-instance-iq4_nl.cu@ggml", "mul_mat_q_stream_k_fixup<(ggml_type)20, 80, false>")]
    helper, quantize, main, fixup = (c[4] for c in calls)
    assert helper[0] is made["ggml_mmid_ids"] and calls[0][3] == 150 * 4
    assert quantize[0] is made["ggml_mmid_x"] and quantize[1] is made["ggml_mmid_ids_src1"]
    assert main[0] is made["ggml_mmid_w"] and main[2] is made["ggml_mmid_ids_dst"] and main[4] is y
    assert fixup[3] is made["ggml_mmid_tmp"] and made["ggml_mmid_tmp"].size == 132 * 80 * 128


class SimpleKernels:
    """The compiled kernels' stand-in: each looked up in its own unit (kernels/build.Kernels.in_source)."""

    def __init__(self, in_source):
        self.in_source = in_source
