"""A fixture whose .npz members are deflated: zeros that inflate to hundreds of times the file's size, a zip
bomb whose every header tells the truth, with the manifest's sha256 made to match so only its size is wrong."""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from strata_bench.data.fixture import Fixture
from strata_bench.data.store import read_manifest, save_fixture, sha256_file

NAME = "zeros-q8_0"


def write_zip_bomb(root: Path, rows: int = 1024, cols: int = 4096) -> Path:
    """root/zeros-q8_0.npz: q8_0 zeros (rows x cols), listed in root's manifest; returns its path."""
    fix = Fixture(NAME, "q8_0", rows, cols, np.zeros((rows, cols // 32 * 34), np.uint8))
    path = save_fixture(fix, root)
    with zipfile.ZipFile(path) as stored:
        members = {info.filename: stored.read(info) for info in stored.infolist()}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    manifest = read_manifest(root)
    manifest["fixtures"][NAME]["sha256"] = sha256_file(path)
    (root / "manifest.json").write_text(json.dumps(manifest))
    return path
