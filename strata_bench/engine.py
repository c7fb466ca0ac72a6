"""The case loop shared by parity (and reused by bench): select cases, load kernels per device,
run, keep every result as it arrives, stop a device at its first fault."""
from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Any, Callable, Iterable

from strata_bench.cases import FAMILIES, Case, CaseFilter, load_builtin_families, load_user_cases, select_cases
from strata_bench.errors import InputError, KernelFault


def prepare_cases(flt: CaseFilter, cases_file: str | None = None, kernels_dir: str | None = None,
                  purpose: str = "parity") -> list[Case]:
    """Load built-in families (and a user's case file), then select the cases matching the filter."""
    load_builtin_families()
    if kernels_dir and not cases_file:
        raise InputError(f"--kernels {kernels_dir} needs --cases FILE.py naming the families that use it")
    if cases_file:
        load_user_cases(cases_file, kernels_dir)
    return select_cases(flt, purpose=purpose)


def device_name(device: int) -> str:
    from cupy_backends.cuda.api import runtime

    name = runtime.getDeviceProperties(device)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def precompile(cases: list[Case], devices: list[int]) -> None:
    """Compile every needed (family, source, arch) at once on a thread pool (NVRTC releases the GIL),
    so a cold cache costs the longest compile rather than the sum; load_kernels then hits the cache."""
    import os

    from strata_bench import build, buildplan

    families = {c.family: FAMILIES[c.family] for c in cases}
    archs = list(dict.fromkeys(build.device_arch(d) for d in devices))
    jobs = buildplan.plan(families, archs)
    buildplan.raise_for_failures(buildplan.run_all(jobs, workers=min(len(jobs), os.cpu_count() or 1)))


class Prefetcher:
    """Runs `prepare(family, case)` for the next `window` cases on worker threads while the GPU works on
    the current one; numpy's large operations release the GIL, so host references overlap."""

    def __init__(self, cases: list[Case], prepare: Callable[[Any, Case], Any], window: int = 24):
        import os
        from concurrent.futures import ThreadPoolExecutor

        self._cases, self._prepare, self._window = cases, prepare, window
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(8, (os.cpu_count() or 2) - 1)))
        self._futures: dict[int, Any] = {}
        self._next = 0
        self._fill(0)  # start at once, so the first cases' references overlap the compile

    def get(self, index: int) -> Any:
        self._fill(index)
        return self._futures.pop(index).result()

    def _fill(self, index: int) -> None:
        while self._next < min(len(self._cases), index + self._window):
            case = self._cases[self._next]
            self._futures[self._next] = self._pool.submit(self._prepare, FAMILIES[case.family], case)
            self._next += 1

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def run_on_devices(cases: list[Case], devices: list[int], per_case: Callable[..., Any],
                   on_result: Callable[[Any], None], on_fault: Callable[[Case, int, KernelFault, float], Any],
                   progress: Any = None, prepare: Callable[[Any, Case], Any] | None = None) -> None:
    """Call per_case(family, case, kernels, device[, prepared]) for every case on every device.

    With `prepare`, host-side work for upcoming cases runs ahead on threads and its result is passed as
    the fifth argument. A KernelFault leaves that device's context unusable, so the device's remaining
    cases are skipped after the fault is recorded; results so far were already handed to on_result."""
    import cupy

    from strata_bench.build import load_kernels

    ahead = Prefetcher(cases, prepare) if prepare else None
    precompile(cases, devices)
    for device in devices:
        ahead = ahead or (Prefetcher(cases, prepare) if prepare else None)
        with cupy.cuda.Device(device):
            for index, case in enumerate(cases):
                family = FAMILIES[case.family]
                start = time.perf_counter()
                try:
                    kernels = load_kernels(family, device)
                    extra = (ahead.get(index),) if ahead else ()
                    result = per_case(family, case, kernels, device, *extra)
                except KernelFault as exc:
                    on_result(on_fault(case, device, exc, time.perf_counter() - start))
                    break
                except BaseException:
                    if ahead:
                        ahead.close()
                    raise
                on_result(result)
                if progress is not None:
                    progress()
        if ahead:
            ahead.close()
            ahead = None
