"""grouped: mixture-of-experts FFN over token entries sorted by expert (old: a dot per entry; new: each
expert's entries as the columns of mmvq_new passes, a weight chunk decoded once per pass of up to 8 entries),
bitwise equal.

Kernels: kernels_src/grouped/grouped.cu (`grouped_gateup_old<F>`, `grouped_down_old<G>`; new's
`grouped_gateup_new<F, R, NC, MINB, U, FCVT>` and `grouped_down_new<G, ...>`, chosen by grouped_new.py's table)
with `quantize_q8_1` (q8_1.cu) before each. A case: fmt = gate/up format, param down = down format,
rows = d_ff, cols = d_model, ncols = entries, param groups = entries per expert ("5-0-1-..."). One launch:
  x (entries, d_model) -> q8_1 -> H = silu(gate_e x) * (up_e x) (entries, d_ff) -> q8_1 -> Y = down_e H.
Outputs H and Y are both compared bitwise between the variants.

Float64 references (docs/ARITHMETIC.md, section 4, derives the tolerances). For the gate and up dots
the mmvq bounds B (matvec_reference) hold per output. With L = 1.1 >= max |silu'|:
  |H_dev - silu(G) U| <= L Bg (|U| + Bu) + |silu(G)| Bu + 8u (|silu(G) U| + the same terms)
(the fp32 chain g/(1+expf(-g))*u has relative error <= 2^-22 (expf, 2 ulp) + 3u), against both the
raw-x chain ("f64(raw acts)") and the q8_1-x chain ("f64(q8_1 acts)").
Y, "f64(q8_1 acts)": down_e times q8_1(float32(H_q)) dequantized (H_q the q8_1-x chain's float64 H); the
device quantizes its own H, which lies within the H bound of H_q, so the kit's q8_1_deviation follows
quantize_q8_1_lane through intervals to bound how far each of its dequantized values can move (zero
for most: only codes near a rounding boundary, or scales near an fp16 boundary, can change).
Y, "f64(raw acts)": down_e times the raw-x chain's float64 H; the bound adds the H bound and the
a-priori q8_1 rounding of H through |down| (loose: it is the whole q8_1 loss of the chain).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from strata_bench.kit import (Q8_1_BYTES, U32, U64, AbiArg, Case, Expected, Family, InputError, LaunchAbi, Variant,
                              activations, ceil_div, chain_depth, check_shape, exact_weights, gamma,
                              launch_quantize_q8_1, matvec_reference, padded, parse_data, q8_1_deviation,
                              q8_1_value_error, quantize_q8_1, row_stride, traits, weights)

from strata_bench.families.grouped_new import GATEUP_LAUNCH, down_launch, launch_matrix, matrix_args, new_launches
from strata_bench.kernels.constants import GROUPED_WARPS as WARPS
GATE_FORMATS = ("iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_m", "iq4_xs", "q2_0")
DOWN_FORMATS = ("iq4_nl", "q2_0", "iq4_xs")
DEFAULT_GROUPS = (5, 0, 1, 8, 3, 6, 2, 7, 3)  # 9 experts, 35 entries: an empty group and a group of 1
D_MODEL, D_FF = 1024, 512
# Experts of more than 8 entries (new: gate/up's restaged windows, 11 = 8 + 2 + 1, 17 = 8 + 8 + 1, 9 = 8 + 1;
# down's NC 4 launch row, 4-entry windows) at d_ff 768, d_model 1280: 40 chunks a gate row (a partial lane
# step), 24 a down row (lanes 24-31 idle). Every gate format and every down format once.
WINDOW_GROUPS = (11, 0, 1, 17, 3, 9)
WINDOW_D_MODEL, WINDOW_D_FF = 1280, 768
WINDOW_PAIRS = (("iq2_xxs", "iq4_nl"), ("iq3_s", "iq4_xs"), ("iq4_xs", "q2_0"), ("q2_0", "q2_0"), ("iq1_m", "iq4_nl"),
                ("iq2_xs", "iq4_xs"), ("iq2_s", "q2_0"), ("iq3_xxs", "iq4_nl"))
SILU_LIPSCHITZ = 1.1  # max |silu'(t)| = 1.0998 (at t ~ 2.4)
SILU_REL = 8 * U32    # expf (2 ulp = 2^-22 = 4u) + add, divide, multiply (3u), rounded up
# Bench: 8 experts of a Mixtral-8x7B-sized FFN (experts, d_model, d_ff). Every expert has entries, so
# every pair touches >= 396 MB of weights (q2_0; 494 MB iq2_xxs/iq4_nl, 748 MB iq4_xs), >= 6x the H200's
# 60 MiB L2 (issue 14: >= 4x). The issue-6 shape (16 x 2048 x 768, 20-40 MB) fitted in the L2 and is gone.
BENCH_SHAPE = (8, 4096, 14336)
BENCH_ENTRIES = (8, 32)  # entries per expert
BENCH_PAIRS = (("iq2_xxs", "iq4_nl"), ("iq3_s", "iq4_xs"), ("iq4_xs", "iq4_xs"), ("q2_0", "q2_0"))
CHAIN_LABELS = {"raw": "f64(raw acts)", "q": "f64(q8_1 acts)"}  # the two references of H and Y, by chain


def groups_param(groups: tuple[int, ...]) -> str:
    """The `groups` case param of entries per expert: "5-0-1-..."."""
    return "-".join(str(g) for g in groups)


def groups_of(case: Case) -> tuple[int, ...]:
    """Entries per expert of a case (its `groups` param), checked against its entry count."""
    text = case.param("groups", "")
    try:
        groups = tuple(int(g) for g in text.split("-"))
    except ValueError:
        raise InputError(f"grouped: bad groups {text!r}: expected entries per expert like 5-0-1") from None
    if not groups or min(groups) < 0 or sum(groups) != case.ncols:
        raise InputError(f"grouped: groups {text!r} must be >= 0 and add up to {case.ncols} entries")
    return groups


def silu(t: np.ndarray) -> np.ndarray:
    """silu(t) = t / (1 + exp(-t)) in float64 (exp overflowing to inf gives -0, as the device's expf)."""
    with np.errstate(over="ignore"):
        return t / (1.0 + np.exp(-t))


class Grouped(Family):
    name = "grouped"
    sources = ("q8_1/q8_1.cu", "grouped/grouped.cu")
    description = ("MoE gate/up (SwiGLU) and down over expert groups: dot per entry (old) vs up to 8 entries per "
                   "decode, mmvq_new's schedule (new)")

    # --- cases ------------------------------------------------------------------------------------
    def default_cases(self) -> Iterable[Case]:
        """Every gate x down pair on DEFAULT_GROUPS (new: passes of 8, 4, 2, 1, an empty expert, one window
        each, down's NC 8 row), then WINDOW_PAIRS on WINDOW_GROUPS (restaged windows, down's NC 4 row)."""
        return ([self.expert_case(g, d, D_FF, D_MODEL, DEFAULT_GROUPS, "seed:1")
                 for g in GATE_FORMATS for d in DOWN_FORMATS]
                + [self.expert_case(g, d, WINDOW_D_FF, WINDOW_D_MODEL, WINDOW_GROUPS, "seed:1")
                   for g, d in WINDOW_PAIRS])

    def bench_cases(self) -> Iterable[Case]:
        """Gate/up (SwiGLU) + down on BENCH_SHAPE, 8 and 32 entries per expert: weights far beyond the L2,
        so GB/s over bytes_moved (the weights of experts with entries + activations) is a DRAM figure.
        Host inputs are seeded random blocks (about 3 s per pair), cached across the two entry counts."""
        experts, d_model, d_ff = BENCH_SHAPE
        return [self.expert_case(g, d, d_ff, d_model, (per,) * experts, "seed:1")
                for g, d in BENCH_PAIRS for per in BENCH_ENTRIES]

    def expert_case(self, gate: str, down: str, d_ff: int, d_model: int, groups: tuple[int, ...],
                    data: str = "seed:1") -> Case:
        """A case of gate/up format `gate`, down format `down`, and `groups` entries per expert."""
        return self.case(gate, d_ff, d_model, sum(groups), data, down=down, groups=groups_param(groups))

    # --- data ---------------------------------------------------------------------------------------
    def make_inputs(self, case: Case) -> dict[str, Any]:
        down = case.param("down")
        if case.fmt not in GATE_FORMATS or down not in DOWN_FORMATS:
            raise InputError(f"grouped: gate/up format must be one of {', '.join(GATE_FORMATS)} and down one of "
                             f"{', '.join(DOWN_FORMATS)}; got {case.fmt} / {down}")
        groups = groups_of(case)
        d_ff, d_model = case.rows, case.cols
        check_shape(case.fmt, d_model)
        check_shape(down, d_ff)
        src = parse_data(case.data)
        experts = len(groups)
        gate = _expert_weights(case.fmt, experts, d_ff, d_model, case.data, 1)
        up = _expert_weights(case.fmt, experts, d_ff, d_model, case.data, 2)
        dn = _expert_weights(down, experts, d_model, d_ff, case.data, 3)
        x = activations(d_model, case.ncols, src)
        offsets = np.concatenate([[0], np.cumsum(groups)]).astype(np.int32)
        return {"gate": gate, "up": up, "down": dn, "x": x, "offsets": offsets, "groups": groups}

    def to_device(self, case: Case, host: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        n = case.ncols
        return {"gate": cupy.asarray(host["gate"]["padded"]), "up": cupy.asarray(host["up"]["padded"]),
                "down": cupy.asarray(host["down"]["padded"]), "x": cupy.asarray(host["x"]),
                "offsets": cupy.asarray(host["offsets"]),
                "xq": cupy.empty((max(n, 1), case.cols // 32 * Q8_1_BYTES), dtype=cupy.uint8),
                "hq": cupy.empty((max(n, 1), case.rows // 32 * Q8_1_BYTES), dtype=cupy.uint8)}

    def alloc_outputs(self, case: Case, dev: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        return {"H": cupy.empty((case.ncols, case.rows), dtype=cupy.float32),
                "Y": cupy.empty((case.ncols, case.cols), dtype=cupy.float32)}

    # --- launch ---------------------------------------------------------------------------------------
    def family_kernels(self, source: str) -> list[str]:
        """quantize_q8_1: both variants quantize x, then H, before each matrix."""
        if source == "q8_1/q8_1.cu":
            return ["quantize_q8_1"]
        return []

    def _old_kernels(self, source: str) -> list[str]:
        if source != Grouped.sources[1]:
            return []
        return ([f"grouped_gateup_old<{traits(fmt)}>" for fmt in GATE_FORMATS]
                + [f"grouped_down_old<{traits(fmt)}>" for fmt in DOWN_FORMATS])

    def _new_kernels(self, source: str) -> list[str]:
        if source != Grouped.sources[1]:
            return []
        formats = {"gateup": GATE_FORMATS, "down": DOWN_FORMATS}
        return [launch.kernel(kind, fmt) for kind, launch in new_launches() for fmt in formats[kind]]

    def _ffn(self, case: Case, kernels: Any, dev: Mapping[str, Any], outs: Mapping[str, Any], stream: Any,
             matrix: Any) -> None:
        """x -> q8_1 -> H (gate/up, SwiGLU) -> q8_1 -> Y (down); `matrix` launches one matrix's kernel."""
        down = case.param("down")
        experts = len(groups_of(case))
        d_ff, d_model = case.rows, case.cols
        launch_quantize_q8_1(kernels, dev["x"], dev["xq"], case.ncols * d_model // 32, stream)
        matrix(kernels, "gateup", case.fmt, d_ff, d_model, experts, dev, (dev["gate"], dev["up"]), dev["xq"],
               outs["H"], stream)
        launch_quantize_q8_1(kernels, outs["H"], dev["hq"], case.ncols * d_ff // 32, stream)
        matrix(kernels, "down", down, d_model, d_ff, experts, dev, (dev["down"],), dev["hq"], outs["Y"], stream)

    def _launch_old(self, case: Case, kernels: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
                    stream: Any = None) -> None:
        self._ffn(case, kernels, dev, outs, stream, _matrix_old)

    def _launch_new(self, case: Case, kernels: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
                    stream: Any = None) -> None:
        self._ffn(case, kernels, dev, outs, stream, _matrix_new(down_launch(groups_of(case))))

    variants = (
        Variant("old", _old_kernels, _launch_old, "one dot per entry"),
        Variant("new", _new_kernels, _launch_new,
                "mmvq_new's schedule per expert (8-warp persistent blocks, staged q8_1 planes): gate/up R 1, 8 "
                "entries a pass; down R 2, 8 entries a pass where no expert has more than 8, else 4"),
    )

    def launch_abi(self) -> LaunchAbi:
        """What a TOML variant receives (docs/ABI.md, "grouped"): its launches, quantizations included."""
        return GROUPED_ABI

    # --- reference ------------------------------------------------------------------------------------
    def reference(self, case: Case, host: Mapping[str, Any]) -> list[Expected]:
        ref = grouped_reference(host, case.rows, case.cols)
        out = []
        for chain, label in CHAIN_LABELS.items():
            # Each element against its own bound (per entry and output, as grouped_reference derives them).
            out.append(Expected("H", ref[f"H_{chain}"], ref[f"tH_{chain}"], label=label,
                                why="L*Bg*(|U|+Bu) + |silu(G)|*Bu + 8u*|H| (mmvq bounds through SwiGLU)"))
            out.append(Expected("Y", ref[f"Y_{chain}"], ref[f"tY_{chain}"], label=label,
                                why="accumulation + |down| (H error + a-priori q8_1 rounding of H)"))
        return out

    def describe_index(self, case: Case, output: str, index: tuple[int, ...]) -> str:
        entry, col = index
        offsets = np.cumsum((0,) + groups_of(case))
        expert = int(np.searchsorted(offsets, entry, side="right") - 1)
        return f"entry {entry} (expert {expert}), {'f' if output == 'H' else 'o'} {col}"

    def bytes_moved(self, case: Case) -> int:
        from strata_bench.formats import get_format

        groups = groups_of(case)
        used = sum(1 for g in groups if g)  # experts with no entries are not read
        gate_bytes = 2 * case.rows * get_format(case.fmt).bytes_per_row(case.cols)
        down_bytes = case.cols * get_format(case.param("down")).bytes_per_row(case.rows)
        acts = case.ncols * (case.cols + case.rows) * (4 + 4 + 2 * Q8_1_BYTES / 32)
        return int(used * (gate_bytes + down_bytes) + acts)

    def flops(self, case: Case) -> int:
        return 2 * case.ncols * 3 * case.rows * case.cols

    def weights_read(self, case: Case) -> int:
        """Gate, up and down of every expert with entries (bytes_moved's weights, as elements)."""
        return sum(1 for g in groups_of(case) if g) * 3 * case.rows * case.cols


# --- the launch ABI of TOML variants (docs/ABI.md) ------------------------------------------------------
def _abi_fields(case: Case) -> dict[str, int]:
    d_ff, d_model = case.rows, case.cols
    return {"d_ff": d_ff, "d_model": d_model, "entries": case.ncols, "experts": len(groups_of(case)),
            "gate_nchunks": d_model // 32, "down_nchunks": d_ff // 32,
            "x_blocks": case.ncols * d_model // 32, "h_blocks": case.ncols * d_ff // 32}


def _strides(matrix: str, expert: bool) -> Any:
    """The row (or expert) stride of the gate/up or down matrices of a case, as long long."""
    def value(c: Case, d: Mapping[str, Any], o: Mapping[str, Any]) -> Any:
        fmt, rows, k = (c.fmt, c.rows, c.cols) if matrix == "gate" else (c.param("down"), c.cols, c.rows)
        return np.int64(row_stride(fmt, k) * (rows if expert else 1))
    return value


GROUPED_ABI = LaunchAbi(
    family="grouped",
    args=(
        AbiArg("x", "const float*", "[entries][d_model] float32 activations, sorted by expert, contiguous",
               lambda c, d, o: d["x"]),
        AbiArg("x_blocks", "long long", "q8_1 blocks of x (entries * d_model / 32)",
               lambda c, d, o: np.int64(c.ncols * c.cols // 32)),
        AbiArg("xq", "block_q8_1*", "[entries][d_model / 32] q8_1 blocks (36 bytes), contiguous; a workspace "
                                    "(quantize x into it, then read it)", lambda c, d, o: d["xq"]),
        AbiArg("gate", "const uint8_t*", "[experts][d_ff] rows of d_model values at `gate_stride` bytes (16-byte "
                                         "aligned; expert e at e * gate_expert_stride); 16 readable bytes after "
                                         "the last row", lambda c, d, o: d["gate"]),
        AbiArg("up", "const uint8_t*", "as gate (same format, strides and padding)", lambda c, d, o: d["up"]),
        AbiArg("gate_stride", "long long", "bytes from one gate (or up) row to the next", _strides("gate", False)),
        AbiArg("gate_expert_stride", "long long", "bytes from one expert's gate (or up) matrix to the next "
                                                  "(d_ff * gate_stride)", _strides("gate", True)),
        AbiArg("d_ff", "int", "gate/up rows per expert (H's width)", lambda c, d, o: np.int32(c.rows)),
        AbiArg("gate_nchunks", "int", "32-value chunks per gate row (d_model / 32)",
               lambda c, d, o: np.int32(c.cols // 32)),
        AbiArg("offsets", "const int*", "[experts + 1] entry offsets: expert e owns entries offsets[e] .. "
                                        "offsets[e+1] - 1", lambda c, d, o: d["offsets"]),
        AbiArg("H", "float*", "[entries][d_ff] float32 silu(gate x) * (up x), contiguous; every element written",
               lambda c, d, o: o["H"]),
        AbiArg("h_blocks", "long long", "q8_1 blocks of H (entries * d_ff / 32)",
               lambda c, d, o: np.int64(c.ncols * c.rows // 32)),
        AbiArg("hq", "block_q8_1*", "[entries][d_ff / 32] q8_1 blocks, contiguous; a workspace (H quantized)",
               lambda c, d, o: d["hq"]),
        AbiArg("down", "const uint8_t*", "[experts][d_model] rows of d_ff values at `down_stride` bytes (16-byte "
                                         "aligned); 16 readable bytes after the last row", lambda c, d, o: d["down"]),
        AbiArg("down_stride", "long long", "bytes from one down row to the next", _strides("down", False)),
        AbiArg("down_expert_stride", "long long", "bytes from one expert's down matrix to the next "
                                                  "(d_model * down_stride)", _strides("down", True)),
        AbiArg("d_model", "int", "down rows per expert (Y's width)", lambda c, d, o: np.int32(c.cols)),
        AbiArg("down_nchunks", "int", "32-value chunks per down row (d_ff / 32)",
               lambda c, d, o: np.int32(c.rows // 32)),
        AbiArg("Y", "float*", "[entries][d_model] float32 down_e H, contiguous; every element written",
               lambda c, d, o: o["Y"]),
    ),
    field_names=("d_ff", "d_model", "entries", "experts", "gate_nchunks", "down_nchunks", "x_blocks", "h_blocks"),
    fields=_abi_fields,
    placeholder_sets=tuple({"gate_traits": traits(g), "down_traits": traits(d), "gate": g, "down": d}
                           for g in GATE_FORMATS for d in DOWN_FORMATS),
    placeholders=lambda case: {"gate_traits": traits(case.fmt), "down_traits": traits(case.param("down")),
                               "gate": case.fmt, "down": case.param("down")},
    baseline="old",
    writes="H and Y: every element; both bitwise equal to old (grouped.cu's ARITHMETIC CONTRACT)",
)


# --- launch helpers -----------------------------------------------------------------------------------
def _matrix_old(kernels: Any, kind: str, fmt: str, rows: int, k: int, experts: int, dev: Mapping[str, Any],
                weights: tuple[Any, ...], act: Any, out: Any, stream: Any) -> None:
    fn = kernels.get(f"grouped_{kind}_old<{traits(fmt)}>")
    fn((ceil_div(rows, WARPS), experts), (32 * WARPS,), matrix_args(fmt, rows, k, dev, weights, act, out),
       stream=stream)


def _matrix_new(down: Any) -> Any:
    """new's matrix launcher for a case whose down kernel is `down` (grouped_new.down_launch)."""
    launches = {"gateup": GATEUP_LAUNCH, "down": down}

    def matrix(kernels: Any, kind: str, fmt: str, rows: int, k: int, experts: int, dev: Mapping[str, Any],
               weights: tuple[Any, ...], act: Any, out: Any, stream: Any) -> None:
        launch_matrix(launches[kind], kernels, kind, fmt, rows, k, experts, dev, weights, act, out, stream)
    return matrix


# --- data and reference helpers ------------------------------------------------------------------------
@lru_cache(maxsize=8)
def _expert_weights(fmt: str, experts: int, rows: int, cols: int, data: str, salt: int) -> dict[str, Any]:
    """One matrix per expert, stacked: raw (experts, rows, bytes), device layout, exact float64 values."""
    src = parse_data(data)
    raw, _ = weights(fmt, experts * rows, cols, src, salt=salt)
    return {"raw": raw.reshape(experts, rows, -1), "padded": padded(fmt, raw),
            "key": (fmt, experts, rows, cols, data, salt)}


def exact_experts(weights: Mapping[str, Any]) -> np.ndarray:
    """float64 (experts, rows, cols) exact values of one stacked expert matrix (references only, so bench
    never builds them)."""
    return _exact_experts(*weights["key"])


@lru_cache(maxsize=8)
def _exact_experts(fmt: str, experts: int, rows: int, cols: int, data: str, salt: int) -> np.ndarray:
    raw = _expert_weights(fmt, experts, rows, cols, data, salt)["raw"]
    return exact_weights(fmt, raw.reshape(-1, raw.shape[-1])).reshape(experts, rows, cols)


def _matvec_parts(w64: np.ndarray, x: np.ndarray, act: np.ndarray) -> tuple[np.ndarray, ...]:
    """(y_q, y_raw, bound_q, bound_raw) of one expert's matrix over its entries, each (entries, rows)."""
    ref = matvec_reference(w64, x, act)
    return ref.y_q, ref.y_raw, ref.bound_q, ref.bound_raw


@dataclass(frozen=True)
class ChainAllowance:
    """What another arithmetic than grouped.cu's adds to the chain's bounds (an error model of a foreign
    variant widens them with it; NO_ALLOWANCE for the built-ins):
    - matvec(fmt, raw, act, k): (entries, rows) extra error of each gate or up output, from the expert's raw
      rows (rows, bytes) and its entries' q8_1 activations (entries, k / 32 * 36);
    - silu_rel(g, bg): relative error of the device's silu(g) * u where its gate value is within bg of g
      (SILU_REL for grouped.cu's expf and IEEE division);
    - down_rel(k): extra relative rounding of a down dot product of k values, over |q8_1(H)| |down|."""

    matvec: Callable[[str, np.ndarray, np.ndarray, int], Any]
    silu_rel: Callable[[np.ndarray, np.ndarray], Any]
    down_rel: Callable[[int], float]


NO_ALLOWANCE = ChainAllowance(lambda fmt, raw, act, k: 0.0, lambda g, bg: SILU_REL, lambda k: 0.0)


def swiglu_bound(g: np.ndarray, u: np.ndarray, bg: np.ndarray, bu: np.ndarray, rel: Any = SILU_REL) -> np.ndarray:
    """Bound on |h_dev - silu(g) u| given |g_dev - g| <= bg, |u_dev - u| <= bu and the relative error `rel` of
    the device's fp32 chain."""
    prop = SILU_LIPSCHITZ * bg * (np.abs(u) + bu) + np.abs(silu(g)) * bu
    return prop + rel * (np.abs(silu(g) * u) + prop) + 1e-30


def grouped_reference(host: Mapping[str, Any], d_ff: int, d_model: int,
                      allowance: ChainAllowance = NO_ALLOWANCE) -> dict[str, np.ndarray]:
    """Float64 H and Y of both chains (raw x, q8_1 x) with per-element bounds of the device's error, widened
    by `allowance` (another arithmetic's)."""
    x = host["x"]
    xq8 = quantize_q8_1(x)
    n = x.shape[0]
    out = {f"{k}_{c}": np.zeros((n, d_ff if k in ("H", "tH") else d_model))
           for k in ("H", "tH", "Y", "tY") for c in ("raw", "q")}
    start = 0
    for e, size in enumerate(host["groups"]):
        rows = slice(start, start + size)
        start += size
        if size:
            _expert_chains(host, e, x[rows], xq8[rows], allowance, {k: v[rows] for k, v in out.items()})
    return out


def _expert_chains(host: Mapping[str, Any], e: int, x: np.ndarray, xq8: np.ndarray, allowance: ChainAllowance,
                   out: dict[str, np.ndarray]) -> None:
    """Expert e's H and Y of both chains, with their bounds, written into `out`'s views of its entries."""
    gate, up, down = (exact_experts(host[k])[e] for k in ("gate", "up", "down"))
    gq, graw, bgq, bgraw = _matvec_parts(gate, x, xq8)
    uq, uraw, buq, buraw = _matvec_parts(up, x, xq8)
    fmt, k = host["gate"]["key"][0], x.shape[1]
    extra_g = allowance.matvec(fmt, host["gate"]["raw"][e], xq8, k)
    extra_u = allowance.matvec(fmt, host["up"]["raw"][e], xq8, k)
    for chain, g, u, bg, bu in (("raw", graw, uraw, bgraw, buraw), ("q", gq, uq, bgq, buq)):
        bg, bu = bg + extra_g, bu + extra_u
        h = silu(g) * u
        th = swiglu_bound(g, u, bg, bu, allowance.silu_rel(g, bg))
        out[f"H_{chain}"][:], out[f"tH_{chain}"][:] = h, th
        down_chain = _down_chain if chain == "raw" else _down_chain_q8
        out[f"Y_{chain}"][:], out[f"tY_{chain}"][:] = down_chain(down, h, th, allowance.down_rel(h.shape[1]))


def _down_chain(d64: np.ndarray, h: np.ndarray, th: np.ndarray, extra_rel: float = 0.0) -> tuple[np.ndarray, ...]:
    """Y = down h in float64, and the bound of the device's Y computed from its own H (within th of h)."""
    n, k = h.shape
    amax = (np.abs(h) + th).reshape(n, -1, 32).max(axis=-1)
    eq = np.repeat(q8_1_value_error(amax), 32, axis=1)  # q8_1 rounding of the device's H
    rel = float(gamma(chain_depth(k // 32))) + float(gamma(k, U64)) + extra_rel
    # One product for every magnitude: |q8_1(H_dev)| <= |h| + th + eq, the H error th + eq, and |h|.
    lhs = np.concatenate([np.abs(h) + th + eq, th + eq, np.abs(h)], axis=0)
    mags = lhs @ np.abs(d64).T
    bound = rel * mags[:n] + mags[n:2 * n] + float(gamma(k, U64)) * mags[2 * n:]
    return h @ d64.T, bound


def _down_chain_q8(d64: np.ndarray, h: np.ndarray, th: np.ndarray, extra_rel: float = 0.0) -> tuple[np.ndarray, ...]:
    """Y = down q8_1(h) in float64 (the q8_1-dequantized activations of the down product), and the bound
    of the device's Y, whose q8_1 of its own H can differ only where th lets a code or scale move."""
    k = h.shape[1]
    ref, dev, mag = q8_1_deviation(h, th)
    rel = float(gamma(chain_depth(k // 32))) + float(gamma(k, U64)) + extra_rel
    n = h.shape[0]
    mags = np.concatenate([mag, dev], axis=0) @ np.abs(d64).T
    return ref @ d64.T, rel * mags[:n] + mags[n:]
