"""Where fixtures live: writes go to $STRATA_FIXTURES, else ./fixtures of the working directory, never the
built-in set by default; reads look in the user's folder, then the built-in set; an explicit folder that
does not exist is an input error naming it (a typo must not silently drop the real-weight cases)."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli
from strata_bench.data import store
from strata_bench.data.synthetic import make_synthetic
from strata_bench.errors import InputError
from strata_bench.kernels.sources import REPO_ROOT

BUILTIN = sorted(store.read_manifest(REPO_ROOT / "fixtures")["fixtures"])


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("STRATA_FIXTURES", raising=False)
    return tmp_path


def test_writes_go_to_cwd_fixtures_and_reads_fall_back_to_builtin(elsewhere):
    assert store.builtin_root() == REPO_ROOT / "fixtures"
    fix = make_synthetic("q8_0", 2, 64, seed=3)
    path = store.save_fixture(fix)
    assert path == elsewhere / "fixtures" / "q8_0-2x64-s3.npz"
    assert sorted(store.read_manifest()["fixtures"]) == sorted(BUILTIN + [fix.name])
    assert store.load_fixture(BUILTIN[0]).name == BUILTIN[0]
    assert store.search_roots() == [elsewhere / "fixtures", REPO_ROOT / "fixtures"]


def test_env_folder_is_the_user_folder(elsewhere, monkeypatch):
    monkeypatch.setenv("STRATA_FIXTURES", str(elsewhere / "mine"))
    with pytest.raises(InputError, match=r"^fixtures folder \$STRATA_FIXTURES=.*/mine does not exist$"):
        store.read_manifest()
    (elsewhere / "mine").mkdir()
    store.save_fixture(make_synthetic("q8_0", 2, 64, seed=4))
    assert (elsewhere / "mine" / "q8_0-2x64-s4.npz").is_file()


def test_default_write_into_builtin_set_is_refused(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    monkeypatch.delenv("STRATA_FIXTURES", raising=False)
    with pytest.raises(InputError, match="refusing to write into the built-in fixtures"):
        store.save_fixture(make_synthetic("q8_0", 2, 64, seed=3))


def test_typo_env_is_exit_2_for_parity_list(elsewhere):
    result = CliRunner().invoke(cli, ["parity", "--list"], env={"STRATA_FIXTURES": "/tmp/typo-strata"})
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["fixtures folder $STRATA_FIXTURES=/tmp/typo-strata does not exist"]


def test_verify_of_missing_root_is_exit_2(elsewhere):
    result = CliRunner().invoke(cli, ["fixtures", "verify", "--root", "/tmp/nonexistent-strata"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["fixtures folder /tmp/nonexistent-strata does not exist"]


def test_fixtures_make_from_elsewhere_leaves_the_checkout_alone(elsewhere):
    before = sorted(p.name for p in (REPO_ROOT / "fixtures").iterdir())
    result = CliRunner().invoke(cli, ["fixtures", "make", "--format", "q8_0", "--shape", "2x64"])
    assert result.exit_code == 0, result.output
    assert (elsewhere / "fixtures" / "q8_0-2x64-s1.npz").is_file()
    assert sorted(p.name for p in (REPO_ROOT / "fixtures").iterdir()) == before
