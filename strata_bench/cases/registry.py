"""The family registry: one instance per registered name. The built-in modules fill FAMILIES when they
are imported; a user's case file registers into the catalog of the run that loads it (runs/catalog.py),
so no run changes what the next one sees."""
from __future__ import annotations

import re
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Iterator, Mapping

from strata_bench.cases.case import Case, CaseFilter
from strata_bench.errors import InputError, RegistryError

if TYPE_CHECKING:
    from strata_bench.cases.family import Family

FAMILIES: dict[str, "Family"] = {}
# Where a class statement registers its family: a run's catalog while its case file runs, else FAMILIES.
_TARGET: ContextVar[dict[str, "Family"] | None] = ContextVar("strata_family_target", default=None)


@contextmanager
def registering_into(catalog: dict[str, "Family"]) -> Iterator[None]:
    """Family classes defined inside the block register into `catalog` instead of FAMILIES."""
    token = _TARGET.set(catalog)
    try:
        yield
    finally:
        _TARGET.reset(token)


def _origin(cls: type) -> tuple[str, str]:
    return cls.__module__, cls.__qualname__


def register_family(cls: type) -> None:
    """Register a Family subclass under its own `name` (a class without one is a base: not registered).

    Refused with a RegistryError: a subclass that inherits its parent's name instead of setting its own,
    and a name another class holds. The same class statement run again (a case file loaded twice, a
    module reloaded) replaces its earlier instance."""
    name = cls.__dict__.get("name")
    if name is None:
        inherited = getattr(cls, "name", "")
        if inherited:
            parent = next(b for b in cls.__mro__[1:] if b.__dict__.get("name") == inherited)
            raise RegistryError(f"family class {cls.__qualname__} inherits the name {inherited!r} of "
                                f"{parent.__qualname__}: set its own `name` (a new name keeps {parent.__qualname__})")
        return
    if not name:
        return
    target = _TARGET.get()
    target = FAMILIES if target is None else target
    held = target.get(name)
    if held is not None and _origin(type(held)) != _origin(cls):
        raise RegistryError(f"family name {name!r} is taken: {type(held).__module__}.{type(held).__qualname__} "
                            f"holds it, {cls.__module__}.{cls.__qualname__} cannot register it too")
    target[name] = cls()


_USER_FILES: set[str] = set()  # every case file loaded, resolved: an exception raised in one is bad input


def user_case_files() -> frozenset[str]:
    """The resolved paths of the case files this process has executed."""
    return frozenset(_USER_FILES)


def _user_module_name(path: str) -> str:
    # One module name per case file, so two files' classes of the same qualname are different classes
    # to the registry while the same file loaded twice re-registers its own.
    import hashlib
    from pathlib import Path

    digest = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:16]
    return f"strata_user_cases_{digest}"


def load_user_cases(path: str, kernels_dir: str | None = None,
                    into: dict[str, "Family"] | None = None) -> list[str]:
    """Execute a user's case file; its Family subclasses register themselves like the built-ins, into
    `into` (a run's catalog; default FAMILIES, for a script of its own).

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
    spec = importlib.util.spec_from_file_location(_user_module_name(path), path)
    if spec is None or spec.loader is None:
        raise InputError(f"cannot load case file {path!r}")
    target = FAMILIES if into is None else into
    before = dict(target)
    _USER_FILES.add(str(Path(path).resolve()))
    with registering_into(target):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    # New instances, compared by identity: loading the same file twice re-registers the same names.
    added = [name for name, fam in target.items() if fam is not before.get(name)]
    for name in added:
        if root is not None and target[name].kernels_root is None:
            target[name].kernels_root = root
    return added


def select_cases(flt: CaseFilter, families: Mapping[str, "Family"] | None = None,
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
        except (re.error, OverflowError) as exc:  # OverflowError: a repetition count past what re can hold
            raise InputError(f"-k {flt.pattern!r} is not a regular expression: {exc}") from None
    listed = (lambda fam: fam.bench_cases()) if purpose == "bench" else (lambda fam: fam.default_cases())
    cases = [c for fam in families.values() for c in listed(fam) if flt.matches(c)]
    if not cases:
        formats = sorted({c.fmt for fam in families.values() for c in fam.default_cases()})
        raise InputError(
            "no case matches the filters; families: " + ", ".join(sorted(families))
            + "; formats: " + ", ".join(formats))
    return cases
