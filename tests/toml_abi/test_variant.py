"""TOML variants (toml_abi/variant.py): a [[variant]] joins its family's table and compiles from its own
source; every error in the file is one line naming the file and the key."""
from __future__ import annotations

import shutil

import pytest

from strata_bench.toml_abi.variant import load_variant_files, parse_variant_file, remove_toml_variants
from strata_bench.errors import InputError
from strata_bench.kernels.sources import REPO_ROOT
from tests.toml_abi.conftest import toml_error

EXAMPLE = REPO_ROOT / "examples" / "toml_variant"
GOOD = '''[[variant]]
family = "mmvq"
name = "row8"
sources = ["k.cu"]
defines = { ROW8_WARPS = 8, FLAG = "" }
kernel = "mmvq_row8<{traits}>"
grid = ["ceil_div(rows, 8)"]
block = "32 * 8"
shared = 0
args = ["w", "stride", "rows", "nchunks", "xq", "ncols", "y"]
'''


# The kernels GOOD and MULTI name, as their source declares them (the name and argument count are checked
# against the text when the file is read).
KERNELS = """template <class F> __global__ void __launch_bounds__(256)
mmvq_row8(const uint8_t* w, long long stride, int rows, int nchunks, const block_q8_1* xq, int ncols, float* y) {}
__global__ void swiglu_h_f32(const float* g, const float* u, long long ld, int rows, int cols, float* h) {}
__global__ void quantize_rows_q8_1(const float* h, int rows, int cols, block_q8_1* q) {}
"""



@pytest.fixture
def folder(tmp_path):
    (tmp_path / "k.cu").write_text(KERNELS)
    (tmp_path / "inc").mkdir()
    return tmp_path


def _write(folder, text, name="v.toml"):
    path = folder / name
    path.write_text(text)
    return path


def test_the_example_parses_and_joins_mmvq(families):
    (tv,) = parse_variant_file(EXAMPLE / "variants.toml", families)
    assert (tv.family, tv.name, tv.source, tv.kernel, tv.args) == (
        "mmvq", "row8", EXAMPLE / "mmvq_row8.cu", "mmvq_row8<{traits}>",
        ("w", "stride", "rows", "nchunks", "xq", "ncols", "y"))
    assert [e({"rows": 8193}) for e in tv.grid] == [1025] and [e({}) for e in tv.block] == [256]
    assert load_variant_files((str(EXAMPLE / "variants.toml"),), families) == [("mmvq", "row8")]
    mmvq = families["mmvq"]
    assert mmvq.default_variants == ("old", "new", "row8")
    assert mmvq.sources[-1] == str(EXAMPLE / "mmvq_row8.cu")
    assert mmvq.name_expressions(str(EXAMPLE / "mmvq_row8.cu")) == [
        f"mmvq_row8<siq::fmt_{f}>" for f in ("iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m",
                                             "iq4_nl", "iq4_xs", "q8_0", "q2_0")]
    options = mmvq.source_options(str(EXAMPLE / "mmvq_row8.cu"))
    assert options[:2] == (f"-I{EXAMPLE}", "-DROW8_WARPS=8") and options[2].startswith("-DSTRATA_VARIANT_HASH=0x")
    assert all(c.variants == ("old", "new", "row8") for c in mmvq.default_cases())
    # loaded again (a second command in one process): its own variant is replaced, not refused
    load_variant_files((str(EXAMPLE / "variants.toml"),), families)
    assert mmvq.default_variants == ("old", "new", "row8")
    remove_toml_variants(families)
    assert mmvq.default_variants == ("old", "new") and "mmvq_row8" not in str(mmvq.sources)


def test_source_hash_follows_headers(families, folder):
    path = _write(folder, GOOD.replace('sources = ["k.cu"]', 'sources = ["k.cu"]\ninclude_dirs = ["inc"]'))
    (tv,) = parse_variant_file(path, families)
    before = tv.options()
    (folder / "inc" / "h.cuh").write_text("#define X 1\n")
    assert tv.options()[-1] != before[-1] and tv.options()[:-1] == before[:-1]
    assert before[:4] == (f"-I{folder}", f"-I{folder / 'inc'}", "-DROW8_WARPS=8", "-DFLAG")


def test_an_include_folder_too_large_to_be_of_headers_is_one_line(families, folder, monkeypatch):
    import strata_bench.toml_abi.variant as toml_variant

    monkeypatch.setattr(toml_variant, "MAX_WALKED", 5)  # include_dirs = ["/"] walked every file system
    for i in range(6):
        (folder / "inc" / f"h{i}.cuh").write_text("")
    path = _write(folder, GOOD.replace('sources = ["k.cu"]', 'sources = ["k.cu"]\ninclude_dirs = ["inc"]'))
    (tv,) = parse_variant_file(path, families)
    with pytest.raises(InputError) as err:
        tv.options()
    # The source's own folder is walked first, and inc is in it.
    assert str(err.value) == (f"{path}: variant 'row8': include folder {folder} holds more than 5 entries: name "
                              "the folder of the headers")


def test_a_fifo_among_the_headers_is_not_read(families, folder):
    import os

    os.mkfifo(folder / "inc" / "pipe.cuh")  # reading it blocked for ever
    (folder / "inc" / "h.cuh").write_text("#define X 1\n")
    path = _write(folder, GOOD.replace('sources = ["k.cu"]', 'sources = ["k.cu"]\ninclude_dirs = ["inc"]'))
    (tv,) = parse_variant_file(path, families)
    assert tv.options()[-1].startswith("-DSTRATA_VARIANT_HASH=0x")


@pytest.mark.parametrize("change,line", [
    (("[[variant]]", "[[variant"), "TOML syntax error: "),
    (('family = "mmvq"', 'family = "nope"'), "variant 'row8': family: unknown family 'nope' (families: dequant, "),
    (('family = "mmvq"', 'family = "q8_1"'), "variant 'row8': kernel: 'mmvq_row8<{traits}>' uses unknown "
                                             "placeholder {traits} (placeholders: none)"),
    (('"ncols", "y"]', '"ncols", "why"]'), "variant 'row8': args[6]: unknown argument 'why' (mmvq ABI: w, stride, "
                                           "rows, nchunks, cols, xq, x, ncols, y, y_stride)"),
    (('"ceil_div(rows, 8)"', '"ceil_div(rowz, 8)"'), "variant 'row8': grid[0]: 'ceil_div(rowz, 8)' uses unknown "
                                                     "field 'rowz' (fields: rows, cols, ncols, nchunks, stride, "
                                                     "row_bytes, block_bytes, block_values)"),
    (('shared = 0', 'shared = "ncols * 36.0"'), "variant 'row8': shared: 'ncols * 36.0': only integer constants "
                                                "(36.0 is not one)"),
    (('["k.cu"]', '["missing.cu"]'), "variant 'row8': sources: 'missing.cu' is not a file ("),
    (('kernel = "mmvq_row8<{traits}>"', 'kernel = "mmvq_row8<{trait}>"'),
     "variant 'row8': kernel: 'mmvq_row8<{trait}>' uses unknown placeholder {trait} (placeholders: {traits}, {fmt})"),
    (('shared = 0', 'shared = 0\nthreads = 3'), "variant 'row8': threads: unknown key (keys: family, name, "),
    (('block = "32 * 8"\n', ''), "variant 'row8': block: missing (a variant needs family, name, sources, kernel, "),
    (('block = "32 * 8"', 'block = [1, 2, 3, 4]'), "variant 'row8': block: expected 1 to 3 integers or "
                                                   "expressions, got [1, 2, 3, 4]"),
    (('defines = { ROW8_WARPS = 8, FLAG = "" }', 'defines = { "8X" = 1 }'),
     "variant 'row8': defines: '8X' is not a C macro name"),
    (('name = "row8"', 'name = "old"'), "variant 'old': name: mmvq already has a variant named 'old' (old, new)"),
])
def test_errors_name_file_and_key(families, folder, change, line):
    path = _write(folder, GOOD.replace(*change))
    assert GOOD.replace(*change) != GOOD
    with pytest.raises(InputError) as err:
        load_variant_files((str(path),), families)
    message = str(err.value)
    assert message.startswith(f"{path}: {line}"), message
    assert "\n" not in message
    assert families["mmvq"].default_variants == ("old", "new")  # nothing joined


def test_file_level_errors(families, folder):
    with pytest.raises(InputError, match=r"^--variants .*nope.toml: no such file$"):
        parse_variant_file(folder / "nope.toml", families)
    path = _write(folder, 'title = "x"\n')
    with pytest.raises(InputError, match=r"v.toml: unknown key 'title' \(a variants file holds \[\[variant\]\] "
                                         r"and \[struct.NAME\] tables\)$"):
        parse_variant_file(path, families)
    path = _write(folder, GOOD + GOOD)
    with pytest.raises(InputError, match=r"v.toml: variant 'row8' of mmvq is declared twice$"):
        parse_variant_file(path, families)


def test_a_copied_example_compiles_from_its_own_folder(families, tmp_path):
    # Paths are relative to the TOML file, wherever it is.
    shutil.copytree(EXAMPLE, tmp_path / "ex")
    (tv,) = parse_variant_file(tmp_path / "ex" / "variants.toml", families)
    assert tv.source == (tmp_path / "ex" / "mmvq_row8.cu").resolve()


@pytest.mark.nvrtc
def test_the_example_compiles_for_sm90(families, cubin_cache):
    from strata_bench.kernels import build

    load_variant_files((str(EXAMPLE / "variants.toml"),), families)
    mmvq = families["mmvq"]
    source = str(EXAMPLE / "mmvq_row8.cu")
    compiled = build.compile_source(source, mmvq.name_expressions(source), "sm_90", mmvq.source_options(source))
    assert sorted(compiled.lowered) == sorted(mmvq.name_expressions(source))
    resources = build.parse_resources(compiled.log, compiled.lowered)
    assert resources and all(r.spill_stores == 0 for r in resources)


def test_the_dequant_rows_toml_joins_dequant(families):
    toml = REPO_ROOT / "examples" / "dequant_rows" / "variants.toml"
    assert load_variant_files((str(toml),), families) == [("dequant", "rows")]
    dequant = families["dequant"]
    assert dequant.default_variants == ("dequant", "rows")
    source = str(REPO_ROOT / "examples" / "dequant_rows" / "my_dequant.cu")
    assert dequant.name_expressions(source)[:2] == ["my_dequant_rows<siq::fmt_iq2_xxs>",
                                                    "my_dequant_rows<siq::fmt_iq2_xs>"]


def test_a_family_without_an_abi_is_refused(families, folder):
    class NoAbi:
        def launch_abi(self):
            return None

    path = _write(folder, GOOD.replace('family = "mmvq"', 'family = "mine"'))
    with pytest.raises(InputError) as err:
        parse_variant_file(path, {**families, "mine": NoAbi()})
    assert str(err.value) == (f"{path}: variant 'row8': family: mine declares no launch ABI for TOML variants "
                              "(families with one: dequant, fp16deq, grouped, mmvq, moe_combine, pfgemm, q2warp, "
                              "q8_1, swiglu_q8)")


MULTI = '''[[variant]]
family = "swiglu_q8"
name = "two"
sources = ["k.cu"]

[[variant.launch]]
kernel = "swiglu_h_f32"
grid = ["ceil_div(rows * cols, 256)"]
block = [256]
args = ["gate", "up", "ld", "rows", "cols", "h"]

[[variant.launch]]
kernel = "quantize_rows_q8_1"
grid = ["ceil_div(blocks, 8)"]
block = ["32 * 8"]
shared = "0"
args = ["h", "rows", "cols", "q"]
'''


def test_launch_tables_parse_in_order(families, folder):
    (tv,) = parse_variant_file(_write(folder, MULTI), families)
    assert [launch.kernel for launch in tv.launches] == ["swiglu_h_f32", "quantize_rows_q8_1"]
    assert tv.launches[1].args == ("h", "rows", "cols", "q")
    assert [e({"blocks": 17}) for e in tv.launches[1].grid] == [3]
    assert tv.kernel == "swiglu_h_f32"  # the one-launch keys read the first launch


@pytest.mark.parametrize("change,line", [
    (('block = [256]\n', ''), "variant 'two': launch[0].block: missing (a launch needs kernel, grid, block, args)"),
    (('shared = "0"', 'shared = "0"\nthreads = 1'), "variant 'two': launch[1].threads: unknown key (launch keys: "
                                                     "kernel, grid, block, args, shared)"),
    (('"cols", "q"]', '"cols", "qq"]'), "variant 'two': launch[1].args[3]: unknown argument 'qq' (swiglu_q8 ABI: "
                                        "gate, up, ld, rows, cols, h, q)"),
    (('"ceil_div(blocks, 8)"', '"ceil_div(block, 8)"'), "variant 'two': launch[1].grid[0]: 'ceil_div(block, 8)' "
                                                        "uses unknown field 'block' (fields: rows, cols, ld, blocks)"),
    (('kernel = "swiglu_h_f32"', 'kernel = "swiglu_h_f32<{fmt}>"'),
     "variant 'two': launch[0].kernel: 'swiglu_h_f32<{fmt}>' uses unknown placeholder {fmt} (placeholders: none)"),
    (('sources = ["k.cu"]', 'sources = ["k.cu"]\nkernel = "x"'),
     "variant 'two': kernel: a variant with [[variant.launch]] tables declares kernel in each launch, not beside "
     "them"),
    (('sources = ["k.cu"]', 'sources = ["k.cu"]\nlaunch = 3'), "TOML syntax error: "),
])
def test_launch_table_errors_name_file_and_key(families, folder, change, line):
    text = MULTI.replace(*change)
    assert text != MULTI
    path = _write(folder, text)
    assert toml_error(path, families).startswith(f"{path}: {line}")
    assert families["swiglu_q8"].default_variants == ("old", "new")


def test_launch_must_be_tables(families, folder):
    text = MULTI[:MULTI.index("[[variant.launch]]")] + "launch = [1, 2]\n"
    path = _write(folder, text)
    with pytest.raises(InputError) as err:
        parse_variant_file(path, families)
    assert str(err.value) == (f"{path}: variant 'two': launch: expected [[variant.launch]] tables (kernel, grid, "
                              "block, shared, args)")


def test_a_launch_whose_grid_is_empty_for_a_case_names_the_launch(families, folder):
    path = _write(folder, MULTI.replace('"ceil_div(rows * cols, 256)"', '"rows - rows"'))
    load_variant_files((str(path),), families)
    swiglu = families["swiglu_q8"]
    case = swiglu.default_cases()[0]

    class Kernels:
        def get(self, name):
            return lambda *a, **k: None

    with pytest.raises(InputError) as err:
        swiglu.launch(case, "two", Kernels(), {}, {})
    assert str(err.value) == f"{path}: variant 'two': launch[0].grid is (0,) for these fields"


def test_nvrtc_flags_decide_the_float_options_and_are_recorded(families, folder):
    from strata_bench.results import provenance

    path = _write(folder, GOOD.replace('shared = 0', 'shared = 0\nflags = ["-use_fast_math", "-ftz=false"]'))
    (tv,) = parse_variant_file(path, families)
    assert tv.compiler == "nvrtc" and tv.options()[-2:] == ("-use_fast_math", "-ftz=false")
    load_variant_files((str(path),), families)
    (record,) = provenance.variant_builds("sm_90", families)
    options = record["options"]
    assert record["compiler"] == "nvrtc" and options[-2:] == ["-use_fast_math", "-ftz=false"]
    # the variant's -ftz=false kept, the base -prec-div/-prec-sqrt/-fmad dropped for fast math's
    assert [o for o in options if o.split("=")[0] in ("-ftz", "-prec-div", "-prec-sqrt", "-fmad")] == ["-ftz=false"]


def test_identical_kernel_names_in_two_sources_stay_apart(families, tmp_path, monkeypatch):
    # Two variants whose files declare the same kernel: each launch finds its own file's kernel (and a
    # third variant of the first file with other defines gets a compile of its own).
    import sys
    import types

    from strata_bench.kernels import build

    calls = []

    class Module:
        def load(self, cubin):
            self.cubin = cubin

        def get_function(self, symbol):
            return lambda grid, block, args, **kw: calls.append(self.cubin)

    cuda = types.SimpleNamespace(function=types.SimpleNamespace(Module=Module))
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)
    files = []
    for name, folder in (("a", "one"), ("b", "two")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "k.cu").write_text(KERNELS)
        text = GOOD.replace('name = "row8"', f'name = "{name}"')
        if name == "a":
            text += "\n" + text.replace('name = "a"', 'name = "a2"').replace("ROW8_WARPS = 8", "ROW8_WARPS = 4")
        files.append(str(_write(tmp_path / folder, text)))
    load_variant_files(tuple(files), families)
    mmvq = families["mmvq"]
    units = mmvq.sources[-3:]
    assert units == (str(tmp_path / "one" / "k.cu"), str(tmp_path / "one" / "k.cu") + "@a2",
                     str(tmp_path / "two" / "k.cu"))
    kernels = build.Kernels([build.CompiledSource(u, "sm_90", (), u.encode(), {e: "_Z" + e for e in
                                                                              mmvq.name_expressions(u)}, "")
                             for u in units])
    case = next(c for c in mmvq.default_cases() if c.fmt == "q8_0")
    monkeypatch.setattr(type(mmvq), "quantize_activations", lambda *a, **k: None)
    dev = {"w": 1, "xq": 2, "x": 3}
    for variant in ("a", "a2", "b"):
        mmvq.launch(case, variant, kernels, dev, {"y": 4})
    assert calls == [u.encode() for u in units]
