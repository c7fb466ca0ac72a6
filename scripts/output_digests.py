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

# Older trees named the poisoned-launch module `strata_bench.run`; newer ones `strata_bench.gpu.launch`.
LAUNCH_MODULES = ("strata_bench.gpu.launch", "strata_bench.run")


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


def _launch_module(tree: Path) -> str:
    """The tree's poisoned-launch module, chosen by its files: asking the importer instead could find a
    module of the same name in another checkout (an editable install resolves submodules itself)."""
    for name in LAUNCH_MODULES:
        if (tree / (name.replace(".", "/") + ".py")).is_file():
            return name
    raise SystemExit(f"no launch module ({', '.join(LAUNCH_MODULES)}) in {tree}")


def _patch_everywhere(digests: dict[str, str], tree: Path) -> None:
    """Replace run_variant in its module and in every module that already imported it by name; a module
    imported later (commands import their library lazily) takes the replacement from the launch module."""
    import importlib

    original = importlib.import_module(_launch_module(tree)).run_variant
    wrapped = _wrap(original, digests)
    for module in list(sys.modules.values()):
        ours = getattr(module, "__name__", "").startswith("strata_bench")
        if ours and getattr(module, "run_variant", None) is original:
            module.run_variant = wrapped


def record(tree: Path, out: Path, parity_args: list[str]) -> int:
    sys.path.insert(0, str(tree.resolve()))
    import importlib

    shown = str(tree)  # as given (relative in the suite): the record names no path of the host
    tree = tree.resolve()
    entry = "strata_bench.cli.main" if (tree / "strata_bench/cli/main.py").is_file() else "strata_bench.cli"
    cli = importlib.import_module(entry).cli  # the entry point imports every command
    digests: dict[str, str] = {}
    _patch_everywhere(digests, tree)
    try:  # without standalone mode click returns the exit code a command asked for
        status = int(cli.main(["parity", *parity_args], prog_name="strata-bench", standalone_mode=False) or 0)
    except SystemExit as exc:
        status = int(exc.code or 0)
    out.write_text(json.dumps({"tree": shown, "status": status, "digests": digests}, indent=0, sort_keys=True))
    print(f"{len(digests)} output digests from {shown} (parity exit {status}) -> {out}")
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
