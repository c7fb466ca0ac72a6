"""The cache's folders and files written by several builds at once: compile's worker threads share one pid,
and the NVRTC stub folder of ggml's build was staged under `<folder>.tmp<pid>`, renamed by one thread
while another still wrote into it (FileNotFoundError: .../ggml-nvrtc-include-<hash>.tmp<pid>/string)."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from strata_bench.ggml import nvrtc_prelude
from strata_bench.kernels.cache_write import publish_folder, replace_file

THREADS = 8


def _at_once(fn, rounds: int = THREADS):
    barrier = threading.Barrier(rounds)

    def one(_):
        barrier.wait()
        return fn()

    with ThreadPoolExecutor(rounds) as pool:
        return list(pool.map(one, range(rounds)))


def test_stub_headers_written_by_threads_at_once(tmp_path, monkeypatch):
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path))
    for _ in range(3):  # a race: a few tries, each from an empty cache
        for old in tmp_path.iterdir():
            for f in old.iterdir():
                f.unlink()
            old.rmdir()
        folders = _at_once(nvrtc_prelude.include_dir)
        assert len(set(folders)) == 1
        files = nvrtc_prelude.headers()
        assert {p.name: p.read_text() for p in folders[0].iterdir()} == files
        assert [p.name for p in tmp_path.iterdir()] == [folders[0].name]  # no staging folder left behind


def test_a_folder_already_there_is_kept(tmp_path):
    folder = tmp_path / "f"
    publish_folder(folder, {"a": b"1"})
    assert publish_folder(folder, {"a": b"2"}) == folder and (folder / "a").read_bytes() == b"1"


def test_files_replaced_by_threads_at_once(tmp_path):
    target = tmp_path / "x.cubin"
    _at_once(lambda: replace_file(target, b"y" * 1_000_000))
    assert target.read_bytes() == b"y" * 1_000_000 and [p.name for p in tmp_path.iterdir()] == ["x.cubin"]
