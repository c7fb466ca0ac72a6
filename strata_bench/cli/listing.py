"""`--list`: the selected cases, one name a line; with --variants, each line also names the case's
variants (the TOML variants among them), so a CPU host shows what a GPU run would check."""
from __future__ import annotations

import click


def echo_cases(cases, show_variants: bool = False) -> None:
    """Print each case once, in order."""
    for case in dict.fromkeys(cases):
        click.echo(f"{case.name}  variants={','.join(case.variants)}" if show_variants else case.name)
