"""experiments/mmvq_onecol: the kernel's arithmetic on the CPU (tests/onecol_host.cpp: the kernel's own decoders,
tables, activation staging and lane walk, bit for bit against one warp per row as mmvq_old computes it, with planted
defects caught), the variant table, the launch path and cases, and the kernels: they compile for sm_90 through the
project's NVRTC path without spills and with the static shared memory the launch declares, and (with cuobjdump)
the table decoders' loops issue fewer instructions a chunk than their controls."""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from tests.cases_file import load_cases_file

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))
from iq_host import harness  # noqa: E402

ONECOL = load_cases_file("experiments/mmvq_onecol/cases.py")
HERE = Path(__file__).resolve().parent

# (rows, cols, columns, data): 48 chunks (lanes 0-15 two steps, 16-31 one); 2 blocks and row bytes not a multiple
# of 16 (the padded stride, both word phases); edge blocks (extreme codes and scales); the DRAM shape's K (8 steps);
# 448 chunks (14 steps) with 3 columns, each its own one-column pass.
SHAPES = [(40, 1536, 2, "seed:7"), (33, 512, 1, "seed:4"), (512, 2560, 1, "edge:2"), (16, 8192, 1, "seed:1"),
          (5, 14336, 3, "seed:2")]


@functools.lru_cache(maxsize=None)
def _host_binary(defines: tuple[str, ...] = ()) -> Path:
    """The host driver, built with `defines` (-D: a planted defect inside a decoder's arithmetic) or as it is."""
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler (g++ or clang++) on PATH")
    out = Path(tempfile.mkdtemp(prefix="onecol_host-")) / "onecol_host"
    cmd = [cxx, "-std=c++17", "-O2", "-Wall", "-Wno-unknown-pragmas", *(f"-D{d}" for d in defines),
           f"-I{ROOT / 'kernels_src'}", f"-I{ROOT / 'tests' / 'iq_host' / 'include'}", f"-I{ONECOL.KERNELS}",
           "-o", str(out), str(HERE / "onecol_host.cpp")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 and "_Float16" in proc.stderr:
        pytest.skip(f"{cxx} has no _Float16")
    assert proc.returncode == 0, proc.stderr
    return out


def _onecol_y(decoder: str, raw: np.ndarray, cols: int, act: np.ndarray, defect: str = "",
              defines: tuple[str, ...] = ()) -> np.ndarray:
    rows, n = raw.shape[0], act.shape[0]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        np.ascontiguousarray(raw, dtype=np.uint8).tofile(tmp / "w.bin")
        np.ascontiguousarray(act, dtype=np.uint8).tofile(tmp / "x.bin")
        subprocess.run([str(_host_binary(defines)), decoder, str(rows), str(cols), str(tmp / "w.bin"), str(tmp / "x.bin"),
                        str(n), str(tmp / "y.bin")], check=True, env={**os.environ, "ONECOL_DEFECT": defect})
        return np.fromfile(tmp / "y.bin", dtype=np.float32).reshape(n, rows)


def _old_and_onecol(decoder: str, rows: int, cols: int, ncols: int, data: str, defect: str = "",
                    defines: tuple[str, ...] = ()):
    fmt = decoder.split(":")[0]
    fam = ONECOL.MmvqOneCol()
    host = fam.make_inputs(fam.case(fmt, rows, cols, ncols, data))
    return (harness.run_dot(fmt, host["raw"], cols, host["act"]),
            _onecol_y(decoder, host["raw"], cols, host["act"], defect, defines))


def _differing(a: np.ndarray, b: np.ndarray) -> int:
    return int((a.view(np.uint32) != b.view(np.uint32)).sum())


@pytest.mark.slow  # host emulation: builds and runs the C++ driver and tests/iq_host's (about 1 s a case)
@pytest.mark.parametrize("decoder", list(ONECOL.DECODERS))
@pytest.mark.parametrize("rows,cols,ncols,data", SHAPES)
def test_the_kernels_arithmetic_equals_one_warp_per_row_bitwise(decoder, rows, cols, ncols, data):
    old, onecol = _old_and_onecol(decoder, rows, cols, ncols, data)
    assert old.shape == onecol.shape == (ncols, rows)
    assert _differing(old, onecol) == 0, f"{_differing(old, onecol)} of {old.size} outputs differ"


# (decoder, ONECOL_DEFECT, -D overrides of onecol_dec.cuh's macros): staged-data defects, then defects inside the
# no-table decoders' own arithmetic (mul7: the 8th sign shifted off the kept bit, the spread without copies 2 and 3,
# i.e. signs 2, 6 and 3; tern: the pair (-1, 0) given state 4's (-1, 1)) and staging (codes in old's order, a zero
# code sum), and in mul7w's load (the lanes whose bytes start at window byte 4 read the first word's).
PLANTED = [("iq2_xxs:stab1", "parity", ()), ("iq2_xxs:stab16", "parity", ()), ("iq1_s:bytes", "codesum", ()),
           ("iq2_xxs:arith", "scale", ()), ("iq1_s:nib", "scale", ()),
           ("iq2_xxs:mul7", "", ("ONECOL_MUL7_PARITY_BIT=29",)), ("iq2_xxs:mul7", "", ("ONECOL_MUL7_SPREAD=0x4081u",)),
           ("iq2_xxs:mul7", "order", ()), ("iq1_s:tern", "", ("ONECOL_TERN_REPLICATED=4",)),
           ("iq1_s:tern", "codesum", ()), ("iq2_xxs:mul7w", "", ("ONECOL_PTR8_UPPER=48u",))]


@pytest.mark.slow  # host emulation (about 1 s a case; a -D build about 3 s more)
@pytest.mark.parametrize("decoder,defect,defines", PLANTED)
def test_a_planted_defect_changes_the_bits(decoder, defect, defines):
    """The comparison has teeth: each planted defect, in the staged data or in a decoder's arithmetic, changes most
    outputs."""
    old, onecol = _old_and_onecol(decoder, 40, 1536, 1, "seed:7", defect, defines)
    assert _differing(old, onecol) > old.size // 2


def test_the_variants_and_their_kernels():
    fam = ONECOL.MmvqOneCol()
    assert [v.name for v in fam.variants] == ["old", "new", "onecol-t", "onecol-t16", "onecol-a", "onecol-m",
                                              "onecol-m2", "onecol-w", "new-mmvq_new"]
    assert ONECOL.CONFIGS[5].launch("iq1_s") is None  # w is iq2_xxs's only: iq1_s's loads have no wider form
    assert ONECOL.CONFIGS[3].launch("iq2_xxs").kernel == "mmvq_onecol<onecol::Iq2xxsMul7, 2, 4, 4>"
    assert ONECOL.CONFIGS[3].launch("iq1_s").kernel == "mmvq_onecol<onecol::Iq1sTern, 4, 3, 4>"
    assert ONECOL.CONFIGS[0].launch("iq2_xxs").kernel == "mmvq_onecol<onecol::Iq2xxsOneCol<true>, 2, 4, 4>"
    assert ONECOL.CONFIGS[0].launch("iq1_s").kernel == "mmvq_onecol<onecol::Iq1sOneCol<true>, 2, 4, 8>"
    assert ONECOL.CONFIGS[1].launch("iq1_s") is None  # t16 is iq2_xxs's only: iq1_s has no sign table
    assert fam.name_expressions(ONECOL.OWN_SOURCE) == [
        launch.kernel for c in ONECOL.CONFIGS for _fmt, launch in c.launches]
    assert {d.split(":")[0] for d in ONECOL.DECODERS} == set(ONECOL.FORMATS)


def test_shared_bytes():
    """Static: the decoder's tables (checked against ptxas's smem below); dynamic: 36 bytes an activation block,
    40 with the code sum."""
    t, a = ONECOL.CONFIGS[0], ONECOL.CONFIGS[2]
    assert t.launch("iq2_xxs").static_bytes == 4 * (256 + 128 + 32)
    assert t.launch("iq1_s").static_bytes == 16384 and a.launch("iq1_s").static_bytes == 8192
    assert t.launch("iq1_s").dynamic_bytes(256) == 256 * 40 and t.launch("iq2_xxs").dynamic_bytes(256) == 256 * 36
    m = ONECOL.CONFIGS[3]  # no added table: iq2_xxs's grid and A copies; iq1_s's u16 selectors, A_LO and A_HI copies
    assert m.launch("iq2_xxs").static_bytes == 4 * (256 + 32) and m.launch("iq1_s").static_bytes == 4 * (1024 + 64)
    assert m.launch("iq1_s").dynamic_bytes(256) == 256 * 40 and m.launch("iq2_xxs").dynamic_bytes(256) == 256 * 36


@pytest.mark.parametrize("index", range(len(ONECOL.CONFIGS)))
def test_a_candidate_launches_its_kernel_for_one_column_passes_and_new_for_the_rest(monkeypatch, index):
    """The launch path without a GPU (stub kernels that record their launches): an 11-column case runs new's
    8- and 2-column passes, then the candidate's kernel for the last (one-column) pass where it has the format."""
    from strata_bench.families import mmvq as family_mod
    from strata_bench.families import mmvq_mma, mmvq_onecol
    from strata_bench.kit import ceil_div
    from tests.stub_kernels import RecordingKernels, stub_launch_helpers

    stub_launch_helpers(monkeypatch, family_mod, mmvq_mma, mmvq_onecol, resident=132)
    config, fam = ONECOL.CONFIGS[index], ONECOL.MmvqOneCol()
    for fmt in ONECOL.FORMATS:
        kernels = RecordingKernels()
        dev = {"w": np.zeros(16, np.uint8), "x": np.zeros((11, 2560), np.float32),
               "xq": np.zeros((11, 80 * 36), np.uint8)}
        fam.launch(fam.case(fmt, 1000, 2560, 11, "seed:1"), config.label, kernels, dev,
                   {"y": np.zeros((11, 1000), np.float32)})
        own = config.launch(fmt)
        last = own.kernel if own else family_mod.new_config(fmt, 1).kernel(fmt, 1)
        assert kernels.names == ["quantize_q8_1", family_mod.new_config(fmt, 8).kernel(fmt, 8),
                                 family_mod.new_config(fmt, 2).kernel(fmt, 2), last]
        if own:
            _, grid, block, args, shared = kernels.calls[-1]
            assert grid == (min(ceil_div(1000, 8 * own.rows), 132),) and block == (256,)
            assert shared == own.dynamic_bytes(80) and args[2] == 1000 and args[3] == 80
            assert args[4].shape == (1, 80 * 36) and args[5].shape == (1, 1000)


def test_new_runs_onecol_m_at_the_bench_shape_and_new_mmvq_new_runs_new_as_it_was(monkeypatch):
    """At 131072 x 8192, one column: `new` launches onecol-m's kernel (the product's since it moved), new-mmvq_new
    mmvq_new's (new before that), and both list what they launch."""
    from strata_bench.families import mmvq as family_mod
    from strata_bench.families import mmvq_mma, mmvq_onecol
    from tests.stub_kernels import RecordingKernels, stub_launch_helpers

    stub_launch_helpers(monkeypatch, family_mod, mmvq_mma, mmvq_onecol, resident=132)
    fam, m = ONECOL.MmvqOneCol(), ONECOL.CONFIGS[3]
    for fmt in ONECOL.FORMATS:
        dev = {"w": np.zeros(16, np.uint8), "x": np.zeros((1, 8192), np.float32),
               "xq": np.zeros((1, 256 * 36), np.uint8)}
        ran = {}
        for variant in ("new", "new-mmvq_new"):
            kernels = RecordingKernels()
            fam.launch(fam.case(fmt, 131072, 8192, 1, "seed:1"), variant, kernels, dev,
                       {"y": np.zeros((1, 131072), np.float32)})
            ran[variant] = kernels.names[1]
        assert ran == {"new": m.launch(fmt).kernel, "new-mmvq_new": family_mod.new_config(fmt, 1).kernel(fmt, 1)}
        assert ran["new-mmvq_new"] in fam.variant("new-mmvq_new").kernels(fam, fam.sources[1])


def test_the_cases():
    fam = ONECOL.MmvqOneCol()
    cases = fam.default_cases()
    assert {c.fmt for c in cases} == set(ONECOL.FORMATS) and {c.ncols for c in cases} == {1, 11}
    shapes = {(c.rows, c.cols) for c in cases if c.data == "seed:1"}
    assert shapes == {(8192, 2560), (16384, 512), (37, 1280), (3, 256), (1000, 14336)}
    assert any(c.data.startswith("edge") for c in cases) and any(c.data.startswith("fixture") for c in cases)
    assert [(c.fmt, c.rows, c.cols, c.ncols) for c in fam.bench_cases()] == [("iq2_xxs", 131072, 8192, 1),
                                                                              ("iq1_s", 131072, 8192, 1)]


@functools.lru_cache(maxsize=None)
def _built(arch: str):
    from strata_bench.kernels.build import compile_source

    return compile_source(ONECOL.OWN_SOURCE, ONECOL.MmvqOneCol().name_expressions(ONECOL.OWN_SOURCE), arch,
                          root=ONECOL.KERNELS)


def _per_kernel_log(built) -> dict[str, str]:
    """ptxas's lines of each kernel, by name expression."""
    names = {v: k for k, v in built.lowered.items()}
    out, current = {}, None
    for line in built.log.splitlines():
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            current = names.get(m.group(1))
            out[current] = ""
        elif current:
            out[current] += line + "\n"
    return out


@pytest.mark.slow  # an NVRTC compile (about 3 s)
@pytest.mark.nvrtc
def test_the_kernels_compile_without_spills_with_the_declared_static_shared_memory():
    logs = _per_kernel_log(_built("sm_90"))
    for config in ONECOL.CONFIGS:
        for _fmt, launch in config.launches:
            log = logs[launch.kernel]
            assert "0 bytes spill stores, 0 bytes spill loads" in log, (launch.kernel, log)
            assert re.search(rf"\b{launch.static_bytes} bytes smem", log), (launch.kernel, log)


CUOBJDUMP = shutil.which(os.environ.get("CUOBJDUMP", "cuobjdump"))


@pytest.mark.slow  # an NVRTC compile, then cuobjdump
@pytest.mark.nvrtc
@pytest.mark.skipif(CUOBJDUMP is None, reason="no cuobjdump (set CUOBJDUMP=path): the SASS is not read")
def test_the_table_loops_issue_fewer_instructions_a_chunk_than_their_controls():
    """Per chunk of the unrolled step loop (its IDP count / 8): the sign table takes iq2_xxs's POPC out of the loop
    and the byte table iq1_s's PRMTs; each table candidate issues fewer instructions than its control."""
    from strata_bench.kernels.sass import dump_sass, loops, parse_functions

    built = _built("sm_90")
    functions = parse_functions(dump_sass(built.cubin, CUOBJDUMP))

    def main_loop(launch):
        body = [lp for lp in loops(functions[built.lowered[launch.kernel]])
                if lp.counts["IDP"] == 8 * launch.rows * launch.unroll][0]
        return body.counts, len(body.opcodes) / (launch.rows * launch.unroll)

    t, a = ONECOL.CONFIGS[0], ONECOL.CONFIGS[2]
    for fmt in ONECOL.FORMATS:
        t_per, a_per = main_loop(t.launch(fmt))[1], main_loop(a.launch(fmt))[1]
        assert t_per < a_per, (fmt, t_per, a_per)
    assert main_loop(t.launch("iq2_xxs"))[0]["POPC"] == 0 < main_loop(a.launch("iq2_xxs"))[0]["POPC"]
    assert main_loop(t.launch("iq1_s"))[0]["PRMT"] < main_loop(a.launch("iq1_s"))[0]["PRMT"]


@pytest.mark.slow  # an NVRTC compile (cached by the test above), then cuobjdump
@pytest.mark.nvrtc
@pytest.mark.skipif(CUOBJDUMP is None, reason="no cuobjdump (set CUOBJDUMP=path): the SASS is not read")
def test_the_no_table_loops_issue_fewer_instructions_a_chunk_with_no_more_shared_loads():
    """Per chunk of the unrolled step loop, against the control at the same launch shape (onecol-a): mul7 and tern
    read shared memory no more often (LDS a chunk) and issue fewer instructions; mul7 keeps one POPC a group (the
    8th sign) and tern no SHF for its high PRMTs beyond the control's count less 4 a chunk."""
    from strata_bench.kernels.sass import dump_sass, loops, parse_functions

    built = _built("sm_90")
    functions = parse_functions(dump_sass(built.cubin, CUOBJDUMP))

    def per_chunk(launch):
        body = [lp for lp in loops(functions[built.lowered[launch.kernel]])
                if lp.counts["IDP"] == 8 * launch.rows * launch.unroll][0]
        chunks = launch.rows * launch.unroll
        return {op: n / chunks for op, n in body.counts.items()}, len(body.opcodes) / chunks

    a, m = ONECOL.CONFIGS[2], ONECOL.CONFIGS[3]
    for fmt in ONECOL.FORMATS:
        (a_ops, a_total), (m_ops, m_total) = per_chunk(a.launch(fmt)), per_chunk(m.launch(fmt))
        assert m_ops["LDS"] <= a_ops["LDS"] and m_total < a_total, (fmt, m_ops, a_ops, m_total, a_total)
    assert per_chunk(m.launch("iq2_xxs"))[0]["POPC"] == 4
    assert per_chunk(m.launch("iq1_s"))[0].get("SHF", 0) <= per_chunk(a.launch("iq1_s"))[0]["SHF"] - 4
