"""strata_bench/kernels/sass.py: SASS text -> functions, loops and counts by pipe, on a canned dump (the shape
cuobjdump 13 prints); and scripts/sass_loops.py end to end where cuobjdump and NVRTC are at hand."""
from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

from strata_bench.errors import InputError
from strata_bench.kernels.sass import dump_sass, loops, parse_functions, units

SASS = """
        code for sm_90
                Function : _Z3fooPi
        .headerflags    @"EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                     /* 0x00000a00ff017b82 */
        /*0010*/                   S2R R0, SR_TID.X ;                         /* 0x0000000000007919 */
        /*0020*/                   LDG.E.CONSTANT R2, desc[UR4][R4.64] ;      /* 0x0000000404027981 */
        /*0030*/                   LOP3.LUT R3, R2, 0xff, RZ, 0xc0, !PT ;     /* 0x000000ff02037812 */
        /*0040*/                   IMAD.SHL.U32 R5, R3, 0x4, RZ ;             /* 0x0000000403057824 */
        /*0050*/                   LDS R6, [R5+UR6] ;                         /* 0x0000000605067984 */
        /*0060*/                   IDP.4A.S8.S8 R7, R6, R8, R7 ;              /* 0x0000000806077226 */
        /*0070*/                   IDP.4A.S8.S8 R7, R6, R9, R7 ;              /* 0x0000000906077226 */
        /*0080*/                   ISETP.GE.AND P0, PT, R0, 0x10, PT ;        /* 0x000000100000780c */
        /*0090*/               @!P0 BRA 0x20 ;                                /* 0xffffff8000008947 */
        /*00a0*/                   FFMA R10, R7, R11, R10 ;                   /* 0x0000000b070a7223 */
        /*00b0*/                   BRA 0xa0 ;                                 /* 0xfffffff000007947 */
                ..........
                Function : _Z3barv
        /*0000*/                   EXIT ;                                     /* 0x000000000000794d */
"""


def test_functions_and_their_instructions_are_parsed_without_modifiers():
    functions = parse_functions(SASS)
    assert list(functions) == ["_Z3fooPi", "_Z3barv"]
    foo = functions["_Z3fooPi"]
    assert [i.opcode for i in foo][:6] == ["LDC", "S2R", "LDG", "LOP3", "IMAD", "LDS"]
    assert foo[9].opcode == "BRA" and foo[9].operands == "0x20" and foo[9].address == 0x90
    assert [i.opcode for i in functions["_Z3barv"]] == ["EXIT"]


def test_loops_are_backward_branches_innermost_first_with_exact_pipe_counts():
    found = loops(parse_functions(SASS)["_Z3fooPi"])
    assert [(lp.start, lp.end) for lp in found] == [(0xa0, 0xb0), (0x20, 0x90)]
    body = found[1]
    assert body.by_pipe() == {"alu": 2, "imad": 1, "idp": 2, "fp32": 0, "lds": 1, "ldg": 1, "st": 0,
                              "other": 1, "total": 8}
    assert units(body, "IDP:2") == 1.0 and units(body, "") == 1.0 and units(found[0], "IDP:8") == 0.0


def test_per_needs_an_opcode_and_a_number():
    with pytest.raises(InputError, match="--per 'IDP': expected OPCODE:N"):
        units(loops(parse_functions(SASS)["_Z3fooPi"])[0], "IDP")


def test_a_missing_cuobjdump_is_one_clear_error(monkeypatch):
    monkeypatch.delenv("CUOBJDUMP", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(InputError, match="cuobjdump not found"):
        dump_sass(b"\x7fELF")


def _script():
    path = Path(__file__).resolve().parents[2] / "scripts" / "sass_loops.py"
    spec = importlib.util.spec_from_file_location("sass_loops", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_refuses_an_unknown_family_with_exit_2(capsys):
    assert _script().main(["--family", "nosuch"]) == 2
    assert "no built-in family 'nosuch'" in capsys.readouterr().err


@pytest.mark.nvrtc
@pytest.mark.skipif(not (os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")), reason="no cuobjdump")
def test_the_script_counts_a_real_kernels_loop(capsys, cubin_cache):
    # The lean iq2_xxs one-column kernel (R = 2 rows, chunk loop unrolled U = 8): 8 dp4a a chunk, so IDP:8
    # counts chunks, and the unrolled loop must be found holding R x U = 16 of them.
    assert _script().main(["--family", "mmvq", "--kernel", r"fmt_iq2_xxs_lean, 1,", "--per", "IDP:8"]) == 0
    cells = [[c.strip() for c in ln.split("|")[1:-1]] for ln in capsys.readouterr().out.splitlines()
             if ln.startswith("| mmvq_new")]
    assert "16" in [row[2] for row in cells]
    assert all(0 < float(row[3]) < float(row[-1]) for row in cells)  # ALU instructions below the total


def test_the_script_adds_a_cases_files_families(capsys):
    """--cases loads an experiment's families beside the built-ins; a family it does not have is still exit 2."""
    assert _script().main(["--cases", "experiments/mmvq_onecol/cases.py", "--family", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "no family 'nosuch'" in err and "mmvq_onecol" in err


@pytest.mark.nvrtc
@pytest.mark.skipif(not (os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")), reason="no cuobjdump")
def test_the_script_counts_an_experiments_kernel_from_its_own_folder(capsys, cubin_cache):
    # experiments/mmvq_onecol's iq1_s table kernel (R = 2, U = 8): its source compiles from the experiment's kernels/.
    assert _script().main(["--cases", "experiments/mmvq_onecol/cases.py", "--family", "mmvq_onecol", "--kernel",
                           r"Iq1sOneCol<true>", "--per", "IDP:8"]) == 0
    units = [ln.split("|")[3].strip() for ln in capsys.readouterr().out.splitlines() if ln.startswith("| mmvq_onecol")]
    assert "16" in units
