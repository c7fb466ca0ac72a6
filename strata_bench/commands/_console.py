"""The rich console the commands print tables on."""
from __future__ import annotations

PIPED_WIDTH = 200  # wide enough that file names and hashes stay on one line in a log or a pipe


def stdout_console():
    """A console on stdout: the terminal's width on a terminal, PIPED_WIDTH when piped or captured."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=PIPED_WIDTH)
