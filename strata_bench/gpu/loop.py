"""The case loop, the one module that runs cases (parity and bench): select the cases, compile their
kernels at once, then on each device run every case, keep every result as it arrives, and stop a
device at its first fault."""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from strata_bench.cases import Case
from strata_bench.errors import KernelFault


def precompile(cases: list[Case], devices: list[int], catalog: Mapping[str, Any]) -> None:
    """Compile every needed (family, source, arch) at once on a thread pool (NVRTC releases the GIL),
    so a cold cache costs the longest compile rather than the sum; load_kernels then hits the cache."""
    import os

    from strata_bench.kernels import build, jobs

    families = {c.family: catalog[c.family] for c in cases}
    archs = list(dict.fromkeys(build.device_arch(d) for d in devices))
    planned = jobs.plan(families, archs)
    jobs.raise_for_failures(jobs.run_all(planned, workers=min(len(planned), os.cpu_count() or 1)))


def run_on_devices(cases: list[Case], devices: list[int], catalog: Mapping[str, Any], per_case: Callable[..., Any],
                   on_result: Callable[[Any], None], on_fault: Callable[[Case, int, KernelFault, float], Any],
                   progress: Any = None, compiled: Callable[[float], None] | None = None) -> None:
    """Call per_case(family, case, kernels, device) for every case on every device.

    A KernelFault leaves that device's context unusable, so the device's remaining cases are skipped
    after the fault is recorded; results so far were already handed to on_result. The other devices'
    contexts are their own: the loop goes on with the next device, whose results are whole. A sticky CUDA
    error that reaches here unwrapped (bench's timing launches) is treated as that device's fault too.
    Host references are computed in this loop, not ahead on worker threads: a run that prepared them on
    8 threads took 66 s on the H200 host against 41 s before (the workers' numpy calls contend with the
    launch loop for the GIL and the cores); parity makes only the cases' inputs and cache lookups ahead,
    on one thread (checks/ahead.py). `compiled` (optional) is given the seconds the compile took.
    In a `parity --sanitize` child (gpu/sanitize.py) CuPy's memory pool is off and a marker line on
    stderr names each case before its launches, for the sanitizer's reports to name their case."""
    import cupy

    from strata_bench.kernels.build import load_kernels
    from strata_bench.gpu import sanitize

    sanitized = sanitize.child_tool() is not None  # a `parity --sanitize` child: no pool, a marker per case
    if sanitized:
        sanitize.prepare_child(cupy)
    start = time.perf_counter()
    precompile(cases, devices, catalog)
    if compiled is not None:
        compiled(time.perf_counter() - start)
    for device in devices:
        with cupy.cuda.Device(device):
            for case in cases:
                family = catalog[case.family]
                if sanitized:
                    sanitize.print_marker(sanitize.case_marker(case.name, device))
                start = time.perf_counter()
                try:
                    kernels = load_kernels(family, device)
                    result = per_case(family, case, kernels, device)
                except Exception as exc:  # only faults are caught; anything else re-raises
                    fault = device_fault(case, device, exc)
                    if fault is None:
                        raise
                    on_result(on_fault(case, device, fault, time.perf_counter() - start))
                    break
                on_result(result)
                if progress is not None:
                    progress()
    if sanitized:
        sanitize.print_marker(sanitize.END_MARKER)


def device_fault(case: Case, device: int, exc: BaseException) -> KernelFault | None:
    """The KernelFault that stops `device`: exc itself, or a sticky CUDA error (illegal address, trap)
    wrapped as one naming the case and the device; None for any other error (it is not a fault)."""
    from strata_bench.gpu.launch import is_sticky_fault

    if isinstance(exc, KernelFault):
        return exc
    if is_sticky_fault(exc):
        fault = KernelFault(f"kernel fault in {case.name} on device {device}: {exc}")
        fault.__cause__ = exc
        return fault
    return None
