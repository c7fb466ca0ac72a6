"""The `parity --sanitize` child's run: the cases and variants of its tool's plan (gpu/sanitize_scope.py),
each variant launched once over poisoned outputs, a marker line before each case and each launch.

No timing repeats, no second poison, no comparisons and no references: the sanitizer watches the launches,
and parity (run without the sanitizer) judges the values. What a tool costs is its launches, so each
launch is made once.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

from strata_bench.cases import Case
from strata_bench.errors import InputError, KernelFault


def narrowed(cases: Sequence[Case], plan: Mapping[str, Sequence[str]] | None) -> list[Case]:
    """The plan's cases in its order, each with the plan's variants; every case where there is no plan.
    InputError where the plan names a case this selection lacks (the parent and child selected apart)."""
    if plan is None:
        return list(cases)
    by_name = {case.name: case for case in cases}
    missing = [name for name in plan if name not in by_name]
    if missing:
        raise InputError(f"sanitize: the plan names {len(missing)} case(s) this selection lacks, "
                         f"the first {missing[0]}")
    return [replace(by_name[name], variants=tuple(variants)) for name, variants in plan.items()]


def launch_each(family: Any, case: Case, kernels: Any, device: int) -> Case:
    """Every variant of the case once, each after its marker (a report names the variant it follows)."""
    from strata_bench.gpu import sanitize
    from strata_bench.gpu.launch import launch_once

    dev = family.device_inputs(case, family.make_inputs(case))
    for variant in case.variants:
        sanitize.print_marker(sanitize.variant_marker(variant))
        launch_once(family, case, variant, kernels, dev)
    return case


def run_child(cases: Sequence[Case], devices: Sequence[int], catalog: Mapping[str, Any]) -> None:
    """The plan's launches on each device (gpu/loop.py prints the case markers); KernelFault after the
    loop where a launch faulted (the sanitizer's report says where)."""
    from strata_bench.gpu import loop
    from strata_bench.gpu.sanitize_scope import read_plan

    faults: list[KernelFault] = []
    loop.run_on_devices(narrowed(cases, read_plan()), list(devices), catalog, launch_each, lambda _result: None,
                        lambda _case, _device, fault, _seconds: faults.append(fault))
    if faults:
        raise KernelFault(f"sanitize: {len(faults)} device(s) faulted, the first: {faults[0]}")
