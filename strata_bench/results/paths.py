"""Where results go: `<results root>/<device slug>/`, the one place that names that folder."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from strata_bench.results.store import slug

NO_DEVICE = "cpu"  # the folder of results recorded without a GPU (command A/B on a CPU host)


def untracked_results_root(default: Path) -> Path:
    """$STRATA_RESULTS_DIR where set; else `default`, unless git tracks files under it (a checkout whose
    results/ is committed evidence): then ~/.cache/strata-bench/results, so a user's runs never dirty the tree."""
    import os
    import subprocess

    if os.environ.get("STRATA_RESULTS_DIR"):
        return Path(os.environ["STRATA_RESULTS_DIR"])
    try:
        listed = subprocess.run(["git", "ls-files", "--", str(default)], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return default
    if listed.returncode != 0 or not listed.stdout.strip():
        return default
    return Path.home() / ".cache" / "strata-bench" / "results"


def device_directory(root: str | Path, device_name: str | None) -> Path:
    """root/<slug of the device name>, e.g. results/nvidia-h200; root/cpu when device_name is None."""
    return Path(root) / slug(NO_DEVICE if device_name is None else device_name)


def provenance_directory(root: str | Path, provenance: Mapping[str, Any]) -> Path:
    """The directory for results with this provenance: its first GPU's name, else 'cpu'."""
    devices = provenance.get("devices") or []
    name = devices[0].get("name") if devices and isinstance(devices[0], Mapping) else None
    return device_directory(root, name or None)
