"""A header under kernels_src/generated/ that Python writes: where it lives, whether the committed copy is
current, and the `--check` command line, shared by the constant tables and the shared constants."""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from strata_bench.kernels.sources import kernels_dir


@dataclass(frozen=True)
class GeneratedHeader:
    """One generated header: its path below kernels_src/, the function that renders its text, and the
    module that regenerates it (named in the stale message)."""

    relpath: str
    render: Callable[[], str]
    module: str

    def path(self, root: Path | None = None) -> Path:
        return (kernels_dir() if root is None else root) / self.relpath

    def is_current(self, root: Path | None = None) -> bool:
        """True when the header under `root` (default: kernels_src/) equals what `render` gives now."""
        path = self.path(root)
        return path.is_file() and path.read_text() == self.render()

    def write(self, root: Path | None = None) -> Path:
        path = self.path(root)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.render())
        return path

    def main(self, argv: list[str] | None, description: str, current_note: str = "") -> int:
        """`python -m MODULE [--check]`: rewrite the header, or exit 1 when the committed one is stale."""
        parser = argparse.ArgumentParser(description=description)
        parser.add_argument("--check", action="store_true", help="exit 1 if the header is stale")
        args = parser.parse_args(argv)
        if not args.check:
            print(f"wrote {self.write()}")
            return 0
        if self.is_current():
            print(f"{self.path()} is current{current_note}")
            return 0
        print(f"{self.path()} is stale: run python -m {self.module}", file=sys.stderr)
        return 1
