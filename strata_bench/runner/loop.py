"""The case loop, the one module that runs cases (parity and bench): select the cases, compile their
kernels at once, then on each device run every case, keep every result as it arrives, and stop a
device at its first fault."""
from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from strata_bench.cases import FAMILIES, Case, CaseFilter, load_user_cases, select_cases

from strata_bench.families import load_builtin_families
from strata_bench.cases.request import CaseRequest, request_cases
from strata_bench.errors import InputError, KernelFault


def prepare_cases(flt: CaseFilter, cases_file: str | None = None, kernels_dir: str | None = None,
                  purpose: str = "parity", request: CaseRequest | None = None) -> list[Case]:
    """Load built-in families (and a user's case file, and TOML variants), then select the cases matching
    the filter and the request (--shape/--cols sweep, --fixtures/--gguf real weights: cases/request.py)."""
    load_builtin_families()
    if kernels_dir and not cases_file:
        raise InputError(f"--kernels {kernels_dir} needs --cases FILE.py naming the families that use it")
    if cases_file:
        load_user_cases(cases_file, kernels_dir)
    if request is None:
        return select_cases(flt, purpose=purpose)
    if request.variants:
        from strata_bench.cases.toml_variant import load_variant_files

        load_variant_files(request.variants, FAMILIES)
    if request.ggml is not None:
        from strata_bench.ggml import load

        load(FAMILIES, request.ggml, request.ggml_b, flt.formats)
    return request_cases(flt, request, FAMILIES, purpose)


def precompile(cases: list[Case], devices: list[int]) -> None:
    """Compile every needed (family, source, arch) at once on a thread pool (NVRTC releases the GIL),
    so a cold cache costs the longest compile rather than the sum; load_kernels then hits the cache."""
    import os

    from strata_bench.kernels import build, jobs

    families = {c.family: FAMILIES[c.family] for c in cases}
    archs = list(dict.fromkeys(build.device_arch(d) for d in devices))
    planned = jobs.plan(families, archs)
    jobs.raise_for_failures(jobs.run_all(planned, workers=min(len(planned), os.cpu_count() or 1)))


def run_on_devices(cases: list[Case], devices: list[int], per_case: Callable[..., Any],
                   on_result: Callable[[Any], None], on_fault: Callable[[Case, int, KernelFault, float], Any],
                   progress: Any = None, compiled: Callable[[float], None] | None = None) -> None:
    """Call per_case(family, case, kernels, device) for every case on every device.

    A KernelFault leaves that device's context unusable, so the device's remaining cases are skipped
    after the fault is recorded; results so far were already handed to on_result. The other devices'
    contexts are their own: the loop goes on with the next device, whose results are whole. A sticky CUDA
    error that reaches here unwrapped (bench's timing launches) is treated as that device's fault too.
    Host references are prepared in this loop, not ahead on worker threads: a run that prepared them on
    8 threads took 66 s on the H200 host against 41 s before (the workers' numpy calls contend with the
    launch loop for the GIL and the cores). `compiled` (optional) is given the seconds the compile took.
    In a `parity --sanitize` child (runner/sanitize.py) CuPy's memory pool is off and a marker line on
    stderr names each case before its launches, for the sanitizer's reports to name their case."""
    import cupy

    from strata_bench.kernels.build import load_kernels
    from strata_bench.runner import sanitize

    sanitized = sanitize.child_tool() is not None  # a `parity --sanitize` child: no pool, a marker per case
    if sanitized:
        sanitize.prepare_child(cupy)
    start = time.perf_counter()
    precompile(cases, devices)
    if compiled is not None:
        compiled(time.perf_counter() - start)
    for device in devices:
        with cupy.cuda.Device(device):
            for case in cases:
                family = FAMILIES[case.family]
                if sanitized:
                    sanitize.print_marker(sanitize.case_marker(case.name, device))
                start = time.perf_counter()
                try:
                    kernels = load_kernels(family, device)
                    result = per_case(family, case, kernels, device)
                except Exception as exc:  # noqa: BLE001 - only faults are caught; anything else re-raises
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
    from strata_bench.runner.launch import is_sticky_fault

    if isinstance(exc, KernelFault):
        return exc
    if is_sticky_fault(exc):
        fault = KernelFault(f"kernel fault in {case.name} on device {device}: {exc}")
        fault.__cause__ = exc
        return fault
    return None


def load_families(names: Sequence[str], cases_file: str | None, kernels_dir: str | None) -> dict[str, Any]:
    """Built-in families plus those a --cases file declares (compiled from --kernels DIR), filtered by name."""
    registry = load_builtin_families()
    if kernels_dir and not cases_file:
        raise InputError(f"--kernels {kernels_dir} needs --cases FILE.py naming the families that use it")
    if cases_file:
        load_user_cases(cases_file, kernels_dir)
    unknown = [n for n in names if n not in registry]
    if unknown:
        raise InputError(f"unknown family {unknown[0]!r}; families: {', '.join(sorted(registry)) or '(none)'}")
    chosen = {n: registry[n] for n in (names or sorted(registry))}
    if not chosen:
        raise InputError("no kernel family is registered (strata_bench/families is empty and no --cases given)")
    return chosen
