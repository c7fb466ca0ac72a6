"""What each compute-sanitizer tool can see, decided before anything runs: the launches (case, variant) a
tool runs and the cases it skips, with the reason.

memcheck and initcheck watch every global access, so they run every launch. racecheck reports hazards on
shared memory and synccheck misuse of barriers, so a kernel that has neither cannot give them a finding:
they run a variant only where one of its kernels may use shared memory or a barrier. What a kernel uses
comes from its compile record (ptxas's static shared bytes and barrier count, build.parse_resources) and
from its source's text for what ptxas cannot count (dynamic shared memory, sized at launch; __syncwarp).
Anything unknown counts as used: a kernel without a record, a log without the barrier count, a helper
outside every kernel body that declares `extern __shared__` or calls __syncwarp. A tool may then run a
launch it need not; it never skips one it could see.

The plan goes to the child as a JSON file named by STRATA_SANITIZE_PLAN: {case name: [variant, ...]}.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, Sequence

PLAN_ENV = "STRATA_SANITIZE_PLAN"  # the child's plan file; unset: every case and variant


@dataclass(frozen=True)
class KernelUse:
    """What one compiled kernel uses that racecheck and synccheck look at; None where it is not known."""

    kernel: str  # its name expression
    shared_bytes: int | None  # static shared memory (ptxas)
    barriers: int | None  # named barriers (ptxas)
    in_text: bool | None  # its body declares `extern __shared__` or calls __syncwarp (None: a helper may)

    @property
    def shares_or_syncs(self) -> bool:
        """True unless every fact is known and none is shared memory or a barrier."""
        return any(fact is None or bool(fact) for fact in (self.shared_bytes, self.barriers, self.in_text))


@dataclass(frozen=True)
class Scope:
    """Which kernels a tool can see, and what a case it skips is told."""

    sees: Callable[[KernelUse], bool]
    skipped_because: str


EVERY = Scope(lambda use: True, "")
SHARED_OR_BARRIER = Scope(lambda use: use.shares_or_syncs, "no kernel of theirs uses shared memory or a barrier")
# The one place a tool's scope is declared.
SCOPES: Mapping[str, Scope] = MappingProxyType({"memcheck": EVERY, "racecheck": SHARED_OR_BARRIER,
                                                "initcheck": EVERY, "synccheck": SHARED_OR_BARRIER})


@dataclass(frozen=True)
class ToolPlan:
    """One tool's launches: (case name, its variants to run) in run order, and the cases it skips."""

    tool: str
    runs: tuple[tuple[str, tuple[str, ...]], ...]
    skipped: tuple[str, ...]

    @property
    def launches(self) -> int:
        return sum(len(variants) for _name, variants in self.runs)

    def skip_note(self) -> str:
        """', 152 skipped (why)', or '' when it skips nothing."""
        return f", {len(self.skipped)} skipped ({SCOPES[self.tool].skipped_because})" if self.skipped else ""

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(dict(self.runs), indent=0))
        return path


KernelsOf = Callable[[Any, str], Sequence["KernelUse | None"]]  # (case, variant) -> its kernels' uses


def plan_tool(tool: str, cases: Sequence[Any], kernels_of: KernelsOf) -> ToolPlan:
    """The launches of `tool` over `cases`: each case with the variants the tool can see (a variant whose
    kernels are not known at all is seen). kernels_of(case, variant) -> its kernels' uses (None: unknown)."""
    scope = SCOPES[tool]
    runs, skipped = [], []
    for case in cases:
        seen = tuple(v for v in case.variants if _sees(scope, kernels_of(case, v)))
        if seen:
            runs.append((case.name, seen))
        else:
            skipped.append(case.name)
    return ToolPlan(tool, tuple(runs), tuple(skipped))


def _sees(scope: Scope, uses: Sequence[KernelUse | None]) -> bool:
    return not uses or any(use is None or scope.sees(use) for use in uses)


def read_plan(env: Mapping[str, str] | None = None) -> dict[str, list[str]] | None:
    """The child's plan ({case name: [variant, ...]}), or None where the parent gave none."""
    path = (os.environ if env is None else env).get(PLAN_ENV)
    return None if not path else json.loads(Path(path).read_text())


# --- what the kernels use, from their compile records ---------------------------------------------------
def family_uses(family: Any, arch: str) -> dict[str, KernelUse]:
    """Every compiled kernel of a family (compiled, or from the cubin cache) by name expression."""
    from strata_bench.kernels import build

    uses: dict[str, KernelUse] = {}
    for compiled in build.compile_family(family, arch):
        text = _source_text(family, compiled.source)
        for res in build.parse_resources(compiled.log, compiled.lowered):
            use = KernelUse(res.kernel, res.shared_bytes, res.barriers, _in_text(text, res.kernel))
            uses.setdefault(res.kernel, use)
    return uses


def variant_kernels(family: Any, variant: str) -> list[str]:
    """The name expressions a variant may launch: the family-wide kernels and its own, from every source (a
    family without a variant table: all of its kernels)."""
    table = getattr(family, "variants", ())
    own = (lambda src: family.variant(variant).kernels(family, src)) if table else family.name_expressions
    names = [k for src in family.sources for k in (*family.family_kernels(src), *own(src))]
    return list(dict.fromkeys(names))


def uses_of(catalog: Mapping[str, Any], arch: str) -> Callable[[Any, str], list[KernelUse | None]]:
    """kernels_of(case, variant) for plan_tool, compiling each family the cases name once."""
    known: dict[str, dict[str, KernelUse]] = {}

    def kernels_of(case: Any, variant: str) -> list[KernelUse | None]:
        family = catalog[case.family]
        if case.family not in known:
            known[case.family] = family_uses(family, arch)
        return [known[case.family].get(k) for k in variant_kernels(family, variant)]

    return kernels_of


def _source_text(family: Any, source: str) -> Any:
    """The source's SyncText, or None where its text cannot be read (a prebuilt binary)."""
    from strata_bench.kernels import build, source_scan
    from strata_bench.kernels.sources import kernels_dir

    root, path = build.resolve_source(source, family.kernels_root)
    return source_scan.sync_text(path, [root, kernels_dir()]) if path.is_file() else None


def _in_text(text: Any, kernel: str) -> bool | None:
    """Whether the kernel's body declares dynamic shared memory or calls __syncwarp; None where a helper
    outside every kernel does, or the text is not at hand."""
    if text is None or text.outside:
        return None
    return kernel.split("<", 1)[0].strip() in text.kernels


def plans(tools: Iterable[str], cases: Sequence[Any], catalog: Mapping[str, Any], arch: str) -> list[ToolPlan]:
    """Each tool's plan over the run's cases, the kernels compiled for `arch` (the sanitized device's)."""
    kernels_of = uses_of(catalog, arch)
    return [plan_tool(tool, cases, kernels_of) for tool in tools]
