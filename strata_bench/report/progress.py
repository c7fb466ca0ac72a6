"""The one progress bar: rich, on stderr, with elapsed time and ETA; silent when asked or when stderr
is not a terminal, so logs, pipes and captured output hold only the results."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Mapping

Advance = Callable[..., None]  # advance(description=None): one step done, optionally a new label


@contextmanager
def progress_bar(label: str, total: int, enabled: bool = True, transient: bool = True) -> Iterator[Advance]:
    """Yield `advance(description=None)`, which counts one of `total` steps done.

    `transient` bars vanish when done (parity, bench, compile: stdout then holds only the tables);
    the A/B bars stay, one per case, with the last run's state in their description.
    """
    with progress_bars({label: total}, enabled, transient) as advance:
        yield lambda description=None: advance(label, description)


@contextmanager
def progress_bars(totals: Mapping[str, int], enabled: bool = True,
                  transient: bool = True) -> Iterator[Callable[[str, str | None], None]]:
    """One bar per label, shown together (work that runs side by side: the sanitizer's tools); yield
    `advance(label, description=None)`, safe to call from several threads (rich's Progress locks)."""
    from rich.console import Console

    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield _nothing
        return
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("eta"), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=transient) as bar:
        tasks = {label: bar.add_task(label, total=total) for label, total in totals.items()}

        def advance(label: str, description: str | None = None) -> None:
            if description is None:
                bar.advance(tasks[label])
            else:
                bar.update(tasks[label], advance=1, description=description)

        yield advance


def _nothing(*_args, **_kwargs) -> None:
    return None
