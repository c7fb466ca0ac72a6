"""A decoder-layer-stack workload for command A/B: the project's kernels run the way an engine would.

Per layer, decode (one token): q8_1 + Q2_0 attention projection (q2warp), q8_1 + i-quant output
projection (mmvq), MoE experts gate/up + SwiGLU and down (grouped), then the MoE combine + residual +
RMS norm (moe_combine). Prefill (N tokens): the same projections in passes of 4 and 8 columns, the
prompt experts as a grouped FP16 tensor-core GEMM (pfgemm), and the combine over N tokens.

Kernel choice follows environment switches, so `strata-bench ab --env-a ... --env-b ...` compares them:
  STRATA_OLD_IQ_MMVQ=1   the per-column ("old") i-quant mat-vec and grouped kernels (default: new)
  STRATA_Q2_WARP=0|1     the exact Q2_0 layout (0) or rows per warp (1, default)
  STRATA_PF_WMMA2=0|1    force the old or the second tensor-core prompt kernel (default: dispatcher)
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from strata_bench.cases import FAMILIES, Case

from strata_bench.families import load_builtin_families
from strata_bench.errors import InputError

D_MODEL, D_ATTN, D_FF, EXPERTS, TOP_K = 2560, 12288, 1024, 128, 8


@dataclass(frozen=True)
class Step:
    """One kernel call of the stack: a family's case, the variant the switches choose, repeats per layer."""

    family: str
    case: Case
    variant: str
    repeats: int = 1


def _switch(name: str, default: str) -> str:
    value = os.environ.get(name, default).strip() or default
    if value not in ("0", "1"):
        raise InputError(f"{name} must be 0 or 1, got {value!r}")
    return value


def chosen_variants() -> dict[str, str]:
    iq = "old" if _switch("STRATA_OLD_IQ_MMVQ", "0") == "1" else "new"
    return {"mmvq": iq, "grouped": iq, "q2warp": "new" if _switch("STRATA_Q2_WARP", "1") == "1" else "old",
            "pfgemm": "auto", "moe_combine": "new"}


def _family(name: str) -> Any:
    return load_builtin_families()[name]


def check_format(fmt: str) -> None:
    """InputError unless both weight families the stack runs with `fmt` have it (checked before a GPU is
    sought: a typo is a usage error, exit 2, not a skip)."""
    load_builtin_families()
    known = sorted(set.intersection(*({c.fmt for c in _family(name).default_cases()} for name in ("mmvq", "grouped"))))
    if fmt not in known:
        raise InputError(f"--weights must be a quant format the stack runs ({', '.join(known)}), got {fmt!r}")


def decode_steps(fmt: str) -> list[Step]:
    """One decode token through one layer: attention projection, output projection, MoE FFN, combine."""
    v = chosen_variants()
    experts = (1,) * TOP_K + (0,) * (EXPERTS - TOP_K)  # one token routed to TOP_K experts
    groups = "-".join(str(g) for g in experts)
    return [Step("q2warp", _family("q2warp").case("q2_0", D_ATTN, D_MODEL, 1, "seed:1"), v["q2warp"]),
            Step("mmvq", _family("mmvq").case(fmt, D_MODEL, 4096, 1, "seed:1"), v["mmvq"]),
            Step("grouped", _family("grouped").case(fmt, D_FF, D_MODEL, sum(experts), "seed:1", down="iq4_nl",
                                                    groups=groups), v["grouped"]),
            Step("moe_combine", _family("moe_combine").case("f32", 1, 2048, TOP_K, "seed:1", lo=0),
                 v["moe_combine"])]


def prefill_steps(fmt: str, tokens: int) -> list[Step]:
    """`tokens` prompt tokens through one layer, the projections in passes of 4 and 8 columns."""
    v = chosen_variants()
    per_expert = max(1, math.ceil(tokens * TOP_K / EXPERTS))
    return [Step("q2warp", _family("q2warp").case("q2_0", D_ATTN, D_MODEL, 4, "seed:1"), v["q2warp"],
                 math.ceil(tokens / 4)),
            Step("mmvq", _family("mmvq").case(fmt, D_MODEL, 4096, 8, "seed:1"), v["mmvq"], math.ceil(tokens / 8)),
            Step("pfgemm", _family("pfgemm").case("iq2_s", 2 * D_FF, D_MODEL, per_expert * EXPERTS, "seed:1",
                                                  ("auto",), groups=f"{per_expert}x{EXPERTS}"), v["pfgemm"]),
            Step("moe_combine", _family("moe_combine").case("f32", tokens, 2048, TOP_K, "seed:1", lo=0),
                 v["moe_combine"])]


class _Prepared:
    """A step's device inputs and outputs, built once; `launch` enqueues the step's repeats."""

    def __init__(self, step: Step, kernels: Any):
        family = FAMILIES[step.family]
        self.step, self.family, self.kernels = step, family, kernels
        self.dev = family.device_inputs(step.case, family.make_inputs(step.case))
        self.outs = family.alloc_outputs(step.case, self.dev)

    def launch(self, stream) -> None:
        for _ in range(self.step.repeats):
            self.family.launch(self.step.case, self.step.variant, self.kernels, self.dev, self.outs, stream=stream)


def _prepare(steps: list[Step], device: int) -> list[_Prepared]:
    from strata_bench.kernels.build import load_kernels

    return [_Prepared(s, load_kernels(FAMILIES[s.family], device)) for s in steps]


def _time_ms(prepared: list[_Prepared], layers: int, passes: int, stream) -> float:
    import cupy

    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record(stream)
    for _ in range(passes):
        for _ in range(layers):
            for p in prepared:
                p.launch(stream)
    stop.record(stream)
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop)


def run(tokens: int, decode_tokens: int, layers: int, fmt: str, device: int = 0) -> dict[str, Any]:
    """Prefill `tokens` then decode `decode_tokens`, `layers` layers each; returns the figures."""
    import cupy

    if tokens < 1 or decode_tokens < 1 or layers < 1:
        raise InputError("--tokens, --decode and --layers must be at least 1")
    load_builtin_families()
    with cupy.cuda.Device(device):
        pre, dec = _prepare(prefill_steps(fmt, tokens), device), _prepare(decode_steps(fmt), device)
        for p in pre + dec:  # outputs zeroed once, so bytes a kernel leaves alone hash the same every run
            for out in p.outs.values():
                out.fill(0)
        cupy.cuda.Device().synchronize()  # the fills ran on the default stream; the timed stream does not wait
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            _time_ms(pre, 1, 1, stream)  # warm-up: module load, clocks
            _time_ms(dec, 1, 1, stream)
            prefill_ms = _time_ms(pre, layers, 1, stream)
            logits = outputs_sha256(pre, stream)
            decode_ms = _time_ms(dec, layers, decode_tokens, stream)
            decoded = outputs_sha256(dec, stream)
    return {"tokens": tokens, "prefill_ms": prefill_ms, "decode_tokens": decode_tokens, "decode_ms": decode_ms,
            "decode_tps": decode_tokens / (decode_ms / 1e3), "layers": layers, "format": fmt,
            "variants": chosen_variants(), "logits_sha256": logits, "decode_sha256": decoded}


def outputs_sha256(prepared: list[_Prepared], stream) -> str:
    """sha256 over every step's outputs, in step order and output-name order: the stand-in for an
    engine's "first-token logits sha256" (any kernel whose bits change, changes it). Read after the
    timed passes, so it costs no timed work."""
    import hashlib

    import cupy

    stream.synchronize()
    digest = hashlib.sha256()
    for p in prepared:
        for name in sorted(p.outs):
            digest.update(name.encode())
            digest.update(cupy.asnumpy(p.outs[name]).tobytes())
    return digest.hexdigest()
