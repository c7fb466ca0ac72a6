"""Cases: one registry of kernel families and the cases they declare; parity, bench and ab all read it.

A case is a frozen dataclass whose fields are its name. A family (one module under
`strata_bench/families/`, or a user's `--cases FILE.py`) knows how to build a case's inputs, launch
each variant, and compute the float64 reference; it registers itself when its class is defined.
"""
from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable, Mapping

from strata_bench.errors import InputError


@dataclass(frozen=True)
class Case:
    """One family x format x shape x columns x data source x variants."""

    family: str
    fmt: str
    rows: int  # output rows (weight rows)
    cols: int  # inputs per row (k)
    ncols: int = 1  # activation columns, entries or tokens, as the family defines
    data: str = "seed:1"  # "seed:N", "edge:N" or "fixture:NAME"
    variants: tuple[str, ...] = ("old", "new")  # the first is the baseline
    params: tuple[tuple[str, Any], ...] = ()  # family-specific knobs, kept hashable

    @property
    def name(self) -> str:
        extra = "".join(f"/{k}={v}" for k, v in self.params)
        return f"{self.family}/{self.fmt}/{self.rows}x{self.cols}/n{self.ncols}/{self.data}{extra}"

    def param(self, key: str, default: Any = None) -> Any:
        return dict(self.params).get(key, default)

    @property
    def baseline(self) -> str:
        return self.variants[0]


@dataclass(frozen=True)
class Expected:
    """A float64 reference for one output, with the tolerance the arithmetic contract allows.

    `tol` bounds max |out - ref| over the output (absolute); `why` names the derivation.
    """

    output: str
    ref: Any  # np.ndarray float64, same shape as the output
    tol: float
    why: str
    label: str = "ref"  # which reference: "f64", "f64(q8_1 acts)", ...


@dataclass(frozen=True)
class Output:
    """A device output a variant writes, with how its bytes are compared."""

    name: str
    array: Any  # cupy.ndarray


class Family(ABC):
    """A kernel family. Subclasses register themselves by name when defined.

    Lifecycle per case: host = make_inputs(case) (numpy, deterministic from the case);
    dev = to_device(case, host) (cupy); outs = alloc_outputs(case, dev); launch(...) fills outs.
    """

    name: ClassVar[str] = ""
    sources: ClassVar[tuple[str, ...]] = ()  # files in kernels_src/ this family compiles
    description: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.name:
            FAMILIES[cls.name] = cls()

    @abstractmethod
    def default_cases(self) -> Iterable[Case]:
        """The cases `strata-bench parity` runs with no filter."""

    @abstractmethod
    def name_expressions(self, source: str) -> list[str]:
        """Template instances / kernel names to compile from one source file."""

    @abstractmethod
    def make_inputs(self, case: Case) -> dict[str, Any]:
        """Host inputs (numpy) built deterministically from the case (fixture or seed)."""

    @abstractmethod
    def to_device(self, case: Case, host: Mapping[str, Any]) -> dict[str, Any]:
        """Copy host inputs to the current device (cupy)."""

    @abstractmethod
    def alloc_outputs(self, case: Case, dev: Mapping[str, Any]) -> dict[str, Any]:
        """Allocate every output a variant writes (cupy arrays; the engine poisons them)."""

    @abstractmethod
    def launch(self, case: Case, variant: str, kernels: Any, dev: Mapping[str, Any],
               outs: Mapping[str, Any], stream: Any = None) -> None:
        """Launch one variant. Must only enqueue work, so bench can capture it in a CUDA graph."""

    @abstractmethod
    def reference(self, case: Case, host: Mapping[str, Any]) -> list[Expected]:
        """Float64 references with tolerances derived from the kernels' arithmetic contract."""

    def bench_cases(self) -> Iterable[Case]:
        """The cases `strata-bench bench` times with no filter (default: the seeded parity cases)."""
        return [c for c in self.default_cases() if c.data.startswith("seed")]

    def compared_outputs(self, case: Case) -> tuple[str, ...] | None:
        """Outputs compared bitwise between variants (None: all of them)."""
        return None

    def related_cases(self, case: Case) -> list[tuple[Case, str, Any]]:
        """Extra bitwise checks: (other case, its output, a function mapping this case's outputs
        to the slice that must equal it). mmvq uses it for 'every column equals the 1-column call'."""
        return []

    def output_values(self, case: Case, name: str, outputs: Mapping[str, Any]) -> Any:
        """Float64 values an Expected named `name` is checked against. Default: that output, widened;
        a family overrides it for derived values (q8_1 bytes decoded, a hi+lo fp16 pair summed)."""
        import numpy as np

        return np.asarray(outputs[name], dtype=np.float64)

    def written_mask(self, case: Case, output: str) -> Any:
        """Bool mask of the elements a variant must write (None: all). Elements outside it (padding)
        must stay unwritten: a kernel that writes into padding fails too."""
        return None

    def errors_must_match(self, case: Case) -> bool:
        """True where variants cannot be bitwise equal but must have the same max |err| against every
        float64 reference (e.g. tensor-core GEMMs with the same fp16 inputs and k order)."""
        return False

    def describe_index(self, case: Case, output: str, index: tuple[int, ...]) -> str:
        """Name an output element for a diagnosis (e.g. 'row 17, column 2, block 3')."""
        return "index " + ",".join(str(i) for i in index)

    def bytes_moved(self, case: Case) -> int:
        """Bytes the kernel must move through memory (quantized weights + activations + outputs)."""
        return 0

    def flops(self, case: Case) -> int:
        return 0


FAMILIES: dict[str, Family] = {}


def load_builtin_families() -> dict[str, Family]:
    """Import the built-in family modules (each registers itself) and return the registry."""
    import importlib
    import pkgutil

    import strata_bench.families as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{pkg.__name__}.{info.name}")
    return FAMILIES


def load_user_cases(path: str, kernels_dir: str | None = None) -> list[str]:
    """Execute a user's case file; its Family subclasses register themselves like the built-ins.

    Families it registers compile from `kernels_dir` (their --kernels DIR) unless the file set a
    `kernels_root` itself. Returns the names it registered."""
    import importlib.util
    from pathlib import Path

    root = None
    if kernels_dir is not None:
        root = Path(kernels_dir).resolve()
        if not root.is_dir():
            raise InputError(f"--kernels {kernels_dir}: not a directory")
    if not Path(path).is_file():
        raise InputError(f"case file not found: {path}")
    spec = importlib.util.spec_from_file_location("strata_user_cases", path)
    if spec is None or spec.loader is None:
        raise InputError(f"cannot load case file {path!r}")
    before = dict(FAMILIES)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    # New instances, compared by identity: loading the same file twice re-registers the same names.
    added = [name for name, fam in FAMILIES.items() if fam is not before.get(name)]
    for name in added:
        if root is not None and getattr(FAMILIES[name], "kernels_root", None) is None:
            FAMILIES[name].kernels_root = root
    return added


@dataclass(frozen=True)
class CaseFilter:
    families: tuple[str, ...] = ()
    formats: tuple[str, ...] = ()
    pattern: str | None = None

    def matches(self, case: Case) -> bool:
        if self.families and case.family not in self.families:
            return False
        if self.formats and case.fmt not in self.formats:
            return False
        return self.pattern is None or re.search(self.pattern, case.name) is not None


def select_cases(flt: CaseFilter, families: Mapping[str, Family] | None = None,
                 purpose: str = "parity") -> list[Case]:
    """Every default (or, for purpose="bench", bench) case of the registry that matches; a filter
    matching nothing is an InputError that lists what exists."""
    families = FAMILIES if families is None else families
    unknown = [f for f in flt.families if f not in families]
    if unknown:
        raise InputError(f"unknown family {unknown[0]!r}; families: {', '.join(sorted(families))}")
    if flt.pattern:
        try:
            re.compile(flt.pattern)
        except re.error as exc:
            raise InputError(f"-k {flt.pattern!r} is not a regular expression: {exc}") from None
    listed = (lambda fam: fam.bench_cases()) if purpose == "bench" else (lambda fam: fam.default_cases())
    cases = [c for fam in families.values() for c in listed(fam) if flt.matches(c)]
    if not cases:
        formats = sorted({c.fmt for fam in families.values() for c in fam.default_cases()})
        raise InputError(
            "no case matches the filters; families: " + ", ".join(sorted(families))
            + "; formats: " + ", ".join(formats))
    return cases
