"""Typed errors of the library. Only the CLI maps them to exit codes."""
from __future__ import annotations


class StrataError(Exception):
    """Base of every error the CLI turns into one line and an exit code."""

    exit_code = 1


class InputError(StrataError):
    """Bad usage or input: unknown format, bad shape, corrupt file (exit 2)."""

    exit_code = 2


class PortInUse(InputError):
    """An A/B's --ready-port is held before its first server starts: every run would measure that
    listener, not its own server (exit 2, nothing written)."""


class CompileError(InputError):
    """NVRTC or nvcc rejected a kernel source; the message carries the log with file:line. Whose source it
    is decides the exit code: the project's own (kernels_src/) is a defect of this tool (1), a user's (a
    --cases family's, a TOML variant's, a ggml tree's) is their input (2). Still an InputError, so every
    caller that records an input problem records this one too."""

    def __init__(self, message: str, own: bool = False) -> None:
        super().__init__(message)
        self.own = own
        self.exit_code = 1 if own else 2


class CheckFailed(StrataError):
    """A parity check failed or a regression was found (exit 1)."""

    exit_code = 1


class KernelFault(StrataError):
    """A kernel faulted (illegal address, launch failure); the CUDA context is gone."""

    exit_code = 1


class NoGpu(StrataError):
    """No usable CUDA GPU on this host (exit 77, automake's skip)."""

    exit_code = 77


class ToolMissing(StrataError):
    """An external program the command runs (compute-sanitizer) is not installed: the run is skipped, with
    the places looked in (exit 77, automake's skip, as for NoGpu)."""

    exit_code = 77


class RegistryError(InputError):
    """A family or format class cannot register: its name is taken by another class, or it inherits its
    parent's name instead of declaring its own."""


class FamilyError(InputError):
    """A family breaks the authoring contract (docs/EXTENDING.md), e.g. hands two rotated input copies
    buffers they cannot be given apart."""
