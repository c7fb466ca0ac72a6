"""Three fake CUDA devices for the --device all CLI tests (bench and parity): a toy family, a cupy whose
Device() is a no-op context, a probe that sees three GPUs, and a loop that compiles nothing and runs the
given cases. Each test module adds what its command calls per case."""
from __future__ import annotations

import contextlib
import os
import sys
from types import SimpleNamespace

from strata_bench.gpu import devices as gpu
from strata_bench.gpu import loop
from strata_bench.runs import prepare as preparing


def fake_three_devices(monkeypatch, family_registry, device_name, cases) -> None:
    family_registry["toy"] = SimpleNamespace(name="toy")

    @contextlib.contextmanager
    def device(index):
        yield

    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(cuda=SimpleNamespace(Device=device)))
    monkeypatch.setattr(gpu, "probe", lambda: gpu.GpuProbe(True, 3, ""))
    monkeypatch.setattr(gpu, "device_name", device_name)
    # bench applies --shape/--cols in prepare (its sweep): here it hands back the given cases
    monkeypatch.setattr(preparing, "prepare", lambda spec: preparing.Prepared(spec, family_registry, list(cases)))
    monkeypatch.setattr(loop, "precompile", lambda c, d, catalog: None)
    monkeypatch.setattr("strata_bench.kernels.build.load_kernels", lambda fam, dev: None)
    # After a kernel fault the CLI leaves with os._exit (the context is gone); here it must return.
    monkeypatch.setattr(os, "_exit", lambda code: sys.exit(code))
