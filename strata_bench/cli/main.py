"""Thin click front end: parse, call the library, render. Typed errors become exit codes here only.

Each command lives in `strata_bench/cli/<name>.py` and exposes `command` (a click command or
group); this module discovers them so adding a command touches one file.
"""
from __future__ import annotations

import importlib
import os
import pkgutil
import sys

import click

from strata_bench import __version__
from strata_bench.errors import StrataError

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_SKIP = 0, 1, 2, 77


class OneLineUsageError(click.ClickException):
    """A click usage error shown as one line (click's own shows usage, a hint and the error on three)."""

    exit_code = EXIT_USAGE

    def __init__(self, error: click.UsageError):
        command = error.ctx.command_path if error.ctx is not None else "strata-bench"
        super().__init__(f"{error.format_message()} (see '{command} --help')")


class StrataGroup(click.Group):
    """Maps library errors to one stderr line and their exit code; never a traceback for bad input."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            raise OneLineUsageError(exc) from None

    def invoke(self, ctx: click.Context):
        try:
            return self._invoke_mapped(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as exc:
            if ctx.params.get("debug"):
                raise
            from strata_bench.cli.crash import crash_line

            line, code = crash_line(exc)
            click.echo(line, err=True)
            ctx.exit(code)

    def _invoke_mapped(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise OneLineUsageError(exc) from None
        except SyntaxError as exc:
            if not _user_file(exc.filename):
                raise
            # A user's --cases file that does not parse is bad input, not a crash.
            click.echo(f"{exc.filename}:{exc.lineno}: syntax error in the case file: {exc.msg}", err=True)
            ctx.exit(EXIT_USAGE)
        except StrataError as exc:
            click.echo(_one_line(exc), err=True)
            if _context_poisoned(exc):
                # After a kernel fault the CUDA context is unusable: tearing down its modules at interpreter
                # exit only prints driver errors. Results are already on disk, so leave at once.
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(exc.exit_code)
            ctx.exit(exc.exit_code)
        except ModuleNotFoundError as exc:
            if exc.name not in _required_modules():
                raise
            # A broken install (a required package missing), not a crash of the command.
            click.echo(f"strata-bench needs the Python package '{exc.name}', which is not installed "
                       f"(pip install -e . installs every requirement)", err=True)
            ctx.exit(EXIT_USAGE)
        except KeyboardInterrupt:
            click.echo("interrupted: results written so far are kept", err=True)
            ctx.exit(130)
        except BrokenPipeError:
            # The reader went away (`report FILE | head`): what it read is what it wanted; no message, and
            # stdout pointed at /dev/null so the interpreter's last flush does not fail again.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            ctx.exit(141)  # 128 + SIGPIPE, as a shell reports a reader that closed the pipe

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(super().list_commands(ctx))


def _user_file(filename: str | None) -> bool:
    """True for a file outside this package (a user's case file), whose syntax errors are input errors."""
    from pathlib import Path

    import strata_bench

    if not filename:
        return False
    return not Path(filename).resolve().is_relative_to(Path(strata_bench.__file__).resolve().parent)


def _required_modules() -> set[str]:
    """Top-level module names of the package's required dependencies (its metadata's Requires-Dist
    without extras), as an import names them: gguf, numpy, pandas, ..."""
    import re
    from importlib import metadata

    try:
        requires = metadata.requires("strata-bench") or []
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return set()
    names = {re.split(r"[ ;<>=!~\[]", r, maxsplit=1)[0] for r in requires if "extra ==" not in r}
    return {n.lower().replace("-", "_") for n in names}


def _context_poisoned(exc: BaseException) -> bool:
    from strata_bench.errors import KernelFault

    seen: set[int] = set()
    # A chain can loop (an exception raised from itself, or two that name each other): stop at a repeat.
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KernelFault):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _one_line(exc: StrataError) -> str:
    text = str(exc).strip()
    # Compile errors carry the NVRTC log on purpose; every other error is one line.
    if exc.__class__.__name__ == "CompileError":
        return text
    return text.splitlines()[0] if text else exc.__class__.__name__


@click.group(cls=StrataGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="strata-bench")
@click.option("--debug", is_flag=True, help="Show the traceback of an unexpected error (else one line).")
def cli(debug: bool) -> None:
    """Parity and benchmark harness for CUDA kernels over GGUF-style quantized weights.

    Exit codes: 0 ok, 1 a check failed or a regression was found, 2 usage or input error,
    77 needs a GPU and none is usable.

    \b
    Example:
        strata-bench parity --family mmvq --format iq2_xxs
    """


def _register_commands() -> None:
    import strata_bench.cli as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"{pkg.__name__}.{info.name}")
        command = getattr(module, "command", None)
        if isinstance(command, click.Command):
            cli.add_command(command)


_register_commands()


def main() -> None:
    # click's own usage errors already exit 2; library errors are mapped in StrataGroup.
    cli(prog_name="strata-bench")


if __name__ == "__main__":
    sys.exit(main())
