"""scripts/engine_carry.py: engine builds packed in parts and unpacked whole, a later arm's unchanged files stored
once, every file checked against the manifest."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("engine_carry", ROOT / "scripts" / "engine_carry.py")
engine_carry = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(engine_carry)


def _bins(root: Path, cuda: bytes) -> Path:
    root.mkdir(parents=True)
    (root / "llama-bench").write_bytes(b"\x7fELF bench")
    (root / "libllama.so.0.5.0").write_bytes(os.urandom(50_000))  # incompressible: several parts
    (root / "libggml-cuda.so.0.25.3").write_bytes(cuda)
    (root / "libggml-cuda.so.0").symlink_to("libggml-cuda.so.0.25.3")
    return root


def test_arms_round_trip_in_parts_with_shared_files_stored_once(tmp_path, capsys):
    a = _bins(tmp_path / "a", b"cuda A" * 1000)
    slow = tmp_path / "slow"
    _bins(slow, b"cuda B" * 1000)
    (slow / "libllama.so.0.5.0").write_bytes((a / "libllama.so.0.5.0").read_bytes())
    records = tmp_path / "builds.json"
    records.write_text('[{"key": "k"}]\n')
    parts = engine_carry.pack(tmp_path / "carry", [("a", a), ("slow", slow)], records, part_bytes=20_000)
    assert [p.name for p in parts] == [f"engines.tar.xz.part{i:02d}" for i in range(len(parts))] and len(parts) == 3
    assert engine_carry.unpack(tmp_path / "carry", tmp_path / "out") == 0
    assert capsys.readouterr().out == f"unpacked 3 parts into {tmp_path / 'out'}: a, slow\n"
    for arm, src in (("a", a), ("slow", slow)):
        for name in ("llama-bench", "libllama.so.0.5.0", "libggml-cuda.so.0.25.3"):
            assert (tmp_path / "out" / arm / name).read_bytes() == (src / name).read_bytes()
        assert os.readlink(tmp_path / "out" / arm / "libggml-cuda.so.0") == "libggml-cuda.so.0.25.3"
    assert (tmp_path / "out" / "slow" / "libllama.so.0.5.0").stat().st_nlink == 2  # one copy, two names
    assert (tmp_path / "out" / "slow" / "libggml-cuda.so.0.25.3").stat().st_nlink == 1
    assert (tmp_path / "out" / "builds.json").read_text() == '[{"key": "k"}]\n'


def test_a_missing_part_is_refused_in_one_line(tmp_path, capsys):
    a = _bins(tmp_path / "a", b"cuda A" * 1000)
    parts = engine_carry.pack(tmp_path / "carry", [("a", a)], None, part_bytes=20_000)
    parts[1].unlink()
    assert engine_carry.unpack(tmp_path / "carry", tmp_path / "out") == 1
    err = capsys.readouterr().err
    assert err.startswith(f"unpack: 2 parts in {tmp_path / 'carry'} are not one whole archive: ") and err.count("\n") == 1


def test_a_changed_file_fails_the_manifest(tmp_path, capsys, monkeypatch):
    a = _bins(tmp_path / "a", b"cuda A" * 1000)
    engine_carry.pack(tmp_path / "carry", [("a", a)], None, part_bytes=1 << 20)
    real = engine_carry.sha256
    monkeypatch.setattr(engine_carry, "sha256", lambda p: "0" * 64 if p.name == "llama-bench" else real(p))
    assert engine_carry.unpack(tmp_path / "carry", tmp_path / "out") == 1
    assert capsys.readouterr().err == f"unpack: a/llama-bench is not the packed file (sha256 {real(a / 'llama-bench')[:12]})\n"


def test_no_parts_is_exit_2(tmp_path, capsys):
    assert engine_carry.main(["unpack", str(tmp_path), str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"unpack: no engines.tar.xz.partNN in {tmp_path}\n"
