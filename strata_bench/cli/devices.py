"""What every GPU command does before its run: pick the devices (or say how many cases will not run, exit
77), and hand the run a progress display."""
from __future__ import annotations

from strata_bench.errors import NoGpu


def chosen_devices(device_spec: str, selected: int, verb: str) -> list[int]:
    """--device N|all against the GPUs present; without one, NoGpu says '{selected} cases selected, none {verb}'."""
    from strata_bench.gpu import devices as gpu

    try:
        return gpu.select_devices(device_spec)
    except NoGpu as exc:
        raise NoGpu(f"{exc}; {selected} cases selected, none {verb}") from None


def device_names(devices: list[int]) -> dict[int, str]:
    from strata_bench.gpu import devices as gpu

    return {d: gpu.device_name(d) for d in devices}


def progress(label: str, total: int):
    """The runs' progress callback: one rich bar (report/progress.py)."""
    from strata_bench.report.progress import progress_bar

    return progress_bar(label, total=total, enabled=True)
