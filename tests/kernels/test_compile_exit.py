"""Whose source failed decides the exit code of a compile error: the project's own kernels_src is a defect of
the tool (exit 1, as the README promises for the project's own failures), a user's source is their input
(exit 2). Both print the compiler's log with the file and line."""
from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli
from strata_bench.kernels.sources import REPO_ROOT

BROKEN = "\nthis is not CUDA;\n"


def _compile(*args):
    return CliRunner().invoke(cli, ["compile", "--arch", "90", "--no-cache", "-j", "1", *args])


@pytest.mark.nvrtc
def test_a_builtin_kernel_that_does_not_compile_exits_1(tmp_path, monkeypatch):
    own = tmp_path / "kernels_src"  # stands in for the installed kernels_src: a broken built-in kernel
    shutil.copytree(REPO_ROOT / "kernels_src", own)
    (own / "q8_1" / "q8_1.cu").write_text((own / "q8_1" / "q8_1.cu").read_text() + BROKEN)
    monkeypatch.setenv("STRATA_KERNELS_SRC", str(own))
    monkeypatch.setattr("strata_bench.kernels.sources.builtin_kernels_dir", lambda: own.resolve())
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path / "cache"))
    result = _compile("--family", "q8_1")
    assert result.exit_code == 1, result.output
    assert "q8_1/q8_1.cu(" in result.stderr and "compile(s) failed" in result.stderr


@pytest.mark.nvrtc
def test_kernels_src_of_the_users_own_is_theirs(tmp_path, monkeypatch):
    """$STRATA_KERNELS_SRC names the user's folder: its compile errors are their input (exit 2)."""
    own = tmp_path / "kernels_src"
    shutil.copytree(REPO_ROOT / "kernels_src", own)
    (own / "q8_1" / "q8_1.cu").write_text((own / "q8_1" / "q8_1.cu").read_text() + BROKEN)
    monkeypatch.setenv("STRATA_KERNELS_SRC", str(own))
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path / "cache"))
    assert _compile("--family", "q8_1").exit_code == 2


@pytest.mark.nvrtc
def test_a_users_kernel_that_does_not_compile_exits_2(tmp_path, monkeypatch):
    user = tmp_path / "mine"
    shutil.copytree(REPO_ROOT / "tests" / "data" / "fault_family", user)
    (user / "fault.cu").write_text((user / "fault.cu").read_text() + BROKEN)
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path / "cache"))
    result = _compile("--cases", str(user / "cases.py"), "--kernels", str(user), "--family", "fault_demo")
    assert result.exit_code == 2, result.output
    assert "fault.cu(" in result.stderr
