"""Run `strata-bench parity` from a source tree and record a sha256 of every output every variant wrote.

Two trees (for example the last landed commit and a refactor of it) give the same digests exactly when
every case's every output has the same bytes: the check that a change kept every result bit.

    python scripts/output_digests.py TREE OUT.json [parity options...]
    python scripts/output_digests.py --compare OLD.json NEW.json

The digest is taken where a variant's outputs come back to the host (the first of the two poisoned
launches), wrapping the tree's own launch function, so the tree's code runs unchanged.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

# Older trees named the poisoned-launch module `strata_bench.run`; newer ones `strata_bench.runner.launch`.
LAUNCH_MODULES = ("strata_bench.runner.launch", "strata_bench.run")


def _digest(array) -> str:
    import numpy as np

    data = np.ascontiguousarray(array)
    head = f"{data.dtype.str}{data.shape}".encode()
    return hashlib.sha256(head + data.view(np.uint8).tobytes()).hexdigest()


def _wrap(original, digests: dict[str, str]):
    def run_variant(family, case, variant, kernels, dev):
        run = original(family, case, variant, kernels, dev)
        for name, array in run.outputs.items():
            digests[f"{case.name}|{variant}|{name}"] = _digest(array)
        return run

    return run_variant


def _patch_everywhere(digests: dict[str, str]) -> None:
    """Replace run_variant in its module and in every module that imported it by name."""
    import importlib

    original = None
    for name in LAUNCH_MODULES:
        try:
            original = importlib.import_module(name).run_variant
            break
        except ModuleNotFoundError:
            continue
    if original is None:
        raise SystemExit("no run_variant found in " + ", ".join(LAUNCH_MODULES))
    wrapped = _wrap(original, digests)
    for module in list(sys.modules.values()):
        ours = getattr(module, "__name__", "").startswith("strata_bench")
        if ours and getattr(module, "run_variant", None) is original:
            module.run_variant = wrapped


def record(tree: Path, out: Path, parity_args: list[str]) -> int:
    sys.path.insert(0, str(tree.resolve()))
    import importlib
    import pkgutil

    try:  # the entry point imports every command (older trees: strata_bench/cli.py)
        cli = importlib.import_module("strata_bench.cli.main").cli
    except ModuleNotFoundError:
        cli = importlib.import_module("strata_bench.cli").cli

    import strata_bench

    for info in pkgutil.walk_packages(strata_bench.__path__, "strata_bench."):
        if ".families" in info.name or info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except Exception:  # an optional module (plots, requantize) may not import here
            pass
    digests: dict[str, str] = {}
    _patch_everywhere(digests)
    try:  # without standalone mode click returns the exit code a command asked for
        status = int(cli.main(["parity", *parity_args], prog_name="strata-bench", standalone_mode=False) or 0)
    except SystemExit as exc:
        status = int(exc.code or 0)
    out.write_text(json.dumps({"tree": str(tree), "status": status, "digests": digests}, indent=0, sort_keys=True))
    print(f"{len(digests)} output digests from {tree} (parity exit {status}) -> {out}")
    return status


def compare(old_path: Path, new_path: Path) -> int:
    old = json.loads(old_path.read_text())["digests"]
    new = json.loads(new_path.read_text())["digests"]
    missing = sorted(set(old) - set(new))
    extra = sorted(set(new) - set(old))
    differ = sorted(k for k in set(old) & set(new) if old[k] != new[k])
    print(f"outputs: {len(old)} old, {len(new)} new, {len(set(old) & set(new))} in both; "
          f"{len(differ)} differ, {len(missing)} only old, {len(extra)} only new")
    for label, keys in (("differs", differ), ("only old", missing), ("only new", extra)):
        for key in keys[:20]:
            print(f"  {label}: {key}")
    if not old:
        print("no digests recorded: nothing was compared")
        return 1
    return 0 if not (differ or missing or extra) else 1


def main(argv: list[str]) -> int:
    if argv[:1] == ["--compare"] and len(argv) == 3:
        return compare(Path(argv[1]), Path(argv[2]))
    if len(argv) < 2:
        print(__doc__)
        return 2
    return record(Path(argv[0]), Path(argv[1]), argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
