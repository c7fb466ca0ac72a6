"""A TOML variant of an engine's kernel with a real launch ABI (a by-value struct, a uint3 fastdiv triple,
a stride in blocks, a template chosen per case by rules over the format and the column count), checked on
the CPU against the cubin's parameter table. The kernels are tests/kernels/data/params.cu's, from the
committed params.fatbin (sm_80 and sm_90), so no compiler is needed."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from strata_bench.toml_abi.variant import load_variant_files, parse_variant_file
from strata_bench.errors import InputError
from strata_bench.kernels import build, cubin_symbols
from tests.toml_abi.conftest import toml_error

DATA = Path(__file__).parents[1] / "kernels" / "data"
pytestmark = pytest.mark.skipif(cubin_symbols.demangler() is None, reason="no c++filt to demangle kernel names")

TOML = '''[struct.fusion]
bias = "const float*"
gate = "const float*"
op = "int"
scale = "float"

[[variant]]
family = "mmvq"
name = "eng"
binary = "params.fatbin"
kernel = "matvec<{type}, {ncols}>"
grid = ["rows", 1, 1]
block = [32, 4]
args = ["w", "x", { struct = "fusion", scale = 1.0 }, "y", { type = "uint3", fastdiv = "ncols" }, "rows",
        { type = "long long", value = "exact_div(stride, block_bytes)" }]

[variant.placeholders]
type = { from = "fmt", map = { iq2_xxs = "(eng::qtype)16" } }
ncols = { from = "ncols", values = [1, 2] }
'''



@pytest.fixture
def folder(tmp_path):
    shutil.copy(DATA / "params.fatbin", tmp_path / "params.fatbin")
    return tmp_path


def _write(folder, text):
    (folder / "v.toml").write_text(text)
    return folder / "v.toml"


def test_rules_choose_the_template_and_the_cases(families, folder):
    path = _write(folder, TOML)
    (tv,) = parse_variant_file(path, families)
    assert [r.name for r in tv.rules] == ["type", "ncols"] and tv.args[2] == "struct fusion"
    load_variant_files((str(path),), families)
    mmvq = families["mmvq"]
    unit = str(folder / "params.fatbin")
    assert mmvq.name_expressions(unit) == ["matvec<(eng::qtype)16, 1>", "matvec<(eng::qtype)16, 2>"]
    runs = {(c.fmt, c.ncols) for c in mmvq.default_cases() if "eng" in c.variants}
    assert runs and runs <= {("iq2_xxs", 1), ("iq2_xxs", 2)}
    assert all(c.variants == ("old", "new") for c in mmvq.default_cases() if (c.fmt, c.ncols) not in runs)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_cubins_parameters_match_the_declared_arguments(families, folder, cubin_cache, arch):
    load_variant_files((str(_write(folder, TOML)),), families)
    mmvq = families["mmvq"]
    unit = str(folder / "params.fatbin")
    (exprs,) = build.programs(mmvq, unit)
    compiled = build.compile_unit(mmvq, unit, exprs, arch)
    assert compiled.lowered == {"matvec<(eng::qtype)16, 1>": "_Z6matvecILN3eng5qtypeE16ELi1EEvPKvPKfNS0_6fusionEPf5uint3ix",
                                "matvec<(eng::qtype)16, 2>": "_Z6matvecILN3eng5qtypeE16ELi2EEvPKvPKfNS0_6fusionEPf5uint3ix"}


@pytest.mark.parametrize("change,line", [
    (('"rows",\n', '{ type = "long long", value = "rows" },\n'),
     "args[5]: 'long long rows' is long long, 8 bytes at offset 64; the cubin's parameter 5 of "
     "matvec<(eng::qtype)16, 1> is 4 bytes at offset 60"),
    ((', "rows",\n        { type = "long long", value = "exact_div(stride, block_bytes)" }]', ', "rows"]'),
     "args: 6 arguments for the 7 parameters of matvec<(eng::qtype)16, 1> in the cubin (sizes [8, 8, 24, 8, 12, "
     "4, 8])"),
    (('op = "int"\n', 'op = "long long"\n'),
     "args[2]: 'struct fusion' is fusion, 32 bytes at offset 16; the cubin's parameter 2 of "
     "matvec<(eng::qtype)16, 1> is 24 bytes at offset 16"),
    (('values = [1, 2]', 'values = [1, 3]'),
     "kernel: kernel 'matvec<(eng::qtype)16, 3>' matches no kernel of the cubin (kernels: matvec<(eng::qtype)16, 1>, "
     "matvec<(eng::qtype)16, 2>, matvec<(eng::qtype)20, 1>)"),
])
def test_a_mismatch_is_one_line_at_compile(families, folder, cubin_cache, change, line):
    # (compile --variants gives this line alone on stderr, exit 2: tests/cases/test_toml_nvcc.py runs the
    # command; here the variant's own build, without compiling mmvq's built-in sources.)
    text = TOML.replace(*change)
    assert text != TOML
    path = _write(folder, text)
    with pytest.raises(InputError) as err:
        _compile(families, path, "sm_90")
    assert str(err.value) == f"{path}: variant 'eng': {line}" and err.value.exit_code == 2


def test_a_cubin_for_another_arch_is_one_line(families, folder, cubin_cache):
    path = _write(folder, TOML)
    with pytest.raises(InputError) as err:
        _compile(families, path, "sm_86")
    assert str(err.value) == (f"{path}: variant 'eng': binary params.fatbin: a fatbin without an sm_86 cubin "
                              "(it has: sm_80, sm_90)")


def test_a_binary_of_8_gib_is_refused_before_it_is_read(families, folder, cubin_cache):
    with open(folder / "params.fatbin", "r+b") as fh:
        fh.truncate(8 << 30)  # sparse: it takes no disk, but reading it whole was a MemoryError
    path = _write(folder, TOML)
    with pytest.raises(InputError) as err:
        _compile(families, path, "sm_90")
    assert str(err.value) == (f"{path}: variant 'eng': binary params.fatbin: 8589934592 bytes, more than the "
                              "1073741824 bytes read here")


def _compile(families, path, arch):
    load_variant_files((str(path),), families)
    mmvq = families["mmvq"]
    unit = str(path.parent / "params.fatbin")
    return [build.compile_unit(mmvq, unit, exprs, arch) for exprs in build.programs(mmvq, unit)]


@pytest.mark.parametrize("change,line", [
    (('scale = 1.0 }', 'scal = 1.0 }'), "args[2].scal: unknown field of struct fusion (fields: bias, gate, op, "
                                        "scale)"),
    (('from = "ncols"', 'from = "ncol"'), "placeholders.ncols.from: 'ncol' is neither a placeholder nor a case field "
                                          "of the mmvq ABI (traits, fmt, rows, cols, ncols, nchunks, stride, "
                                          "row_bytes, block_bytes, block_values)"),
    (('kernel = "matvec<{type}, {ncols}>"', 'kernel = "matvec<{typ}, {ncols}>"'),
     "kernel: 'matvec<{typ}, {ncols}>' uses unknown placeholder {typ} (placeholders: {traits}, {fmt}, {type}, "
     "{ncols})"),
    (('type = { from', 'fmt = { from'), "placeholders.fmt: 'fmt' must be a new name (the ABI's placeholders: "
                                        "traits, fmt)"),
    (('block = [32, 4]', 'block = [32, 64]'), "block: [32, 64] is 2048 threads (a block holds at most 1024; "),
])
def test_parse_errors_are_one_line(families, folder, change, line):
    text = TOML.replace(*change)
    assert text != TOML
    path = _write(folder, text)
    assert toml_error(path, families).startswith(f"{path}: variant 'eng': {line}")


def test_list_shows_the_variant_where_it_runs(families, folder):
    path = _write(folder, TOML)
    result = CliRunner().invoke(_cli(), ["parity", "--variants", str(path), "--family", "mmvq", "--format",
                                         "iq2_xxs,iq3_s", "--list"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert any(ln.endswith("variants=old,new,eng") and "/iq2_xxs/" in ln and "/n1/" in ln for ln in lines)
    assert all(ln.endswith("variants=old,new") for ln in lines if "/iq3_s/" in ln or "/n8/" in ln)


@pytest.mark.parametrize("command", [["parity", "--list"], ["compile", "--arch", "90"]])
def test_a_constant_that_does_not_fit_is_refused_before_anything(families, folder, cubin_cache, command):
    path = _write(folder, TOML.replace('"rows",\n', '{ type = "int", value = 99999999999 },\n'))
    result = CliRunner().invoke(_cli(), [*command, "--variants", str(path), "--family", "mmvq"])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [f"{path}: variant 'eng': args[5]: 99999999999 does not fit int"]


def _cli():
    from strata_bench.cli.main import cli

    return cli


def test_an_error_model_joins_the_variant(families, folder):
    from strata_bench.toml_abi.error_model import TomlErrorModel

    text = TOML + '\n[variant.error]\nper_format = { iq2_xxs = 2e-4 }\nbaseline_factor = 8\n'
    load_variant_files((str(_write(folder, text)),), families)
    assert families["mmvq"].variant("eng").error_model == TomlErrorModel((("iq2_xxs", 2e-4),), 8.0)
    bad = TOML + '\n[variant.error]\nper_format = { iq9 = 2e-4 }\n'
    with pytest.raises(InputError, match=r"variant 'eng': error.per_format.iq9: not a format of the family \(iq2_xxs, "):
        load_variant_files((str(_write(folder, bad)),), families)
