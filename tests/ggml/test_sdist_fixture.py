"""The real tree's fixture (tests/ggml_trees.py) gives a reason, not an error, where the pinned sdist
cannot be had: a download that fails, a tarball of another checksum."""
from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from tests import ggml_trees


def test_a_failed_download_is_unavailable_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("STRATA_GGML_SDIST_CACHE", str(tmp_path / "cache"))

    def refuse(*a, **k):
        raise urllib.error.URLError("no network here")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    with pytest.raises(ggml_trees.Unavailable) as err:
        ggml_trees.pinned_sdist_tree()
    assert str(err.value) == (f"the pinned sdist could not be had ({ggml_trees.SDIST_URL}): "
                              f"<urlopen error no network here>")
    assert list((tmp_path / "cache").iterdir()) == []  # no partial download left behind


def test_a_tarball_of_another_checksum_is_unavailable(tmp_path, monkeypatch):
    monkeypatch.setenv("STRATA_GGML_SDIST_CACHE", str(tmp_path))
    tarball = tmp_path / ggml_trees.SDIST_NAME
    tarball.write_bytes(b"not the sdist")
    with pytest.raises(ggml_trees.Unavailable) as err:
        ggml_trees.pinned_sdist_tree()
    assert str(err.value) == (f"{tarball}: sha256 6c921a4e4ada386207c32401f1df7045aecbc79f2fbc27436598021441e42fdd, "
                              f"not the pinned {ggml_trees.SDIST_SHA256}")
