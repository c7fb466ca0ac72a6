"""moe_combine: MoE combine + residual update + RMS norm: two kernels (old) vs one fused kernel (new).

Kernels: kernels_src/moe_combine/moe_combine.cu (semantics, fixed reduction orders and the bitwise argument are
its ARITHMETIC CONTRACT). A case is T tokens (`rows`) of hidden size H (`cols`) with top-k K (`ncols`);
params: `lo` (1: also write xn16_lo), `ld` (token stride in elements, default H), `eps`.

Why the residual is R_in -> R_out and not updated in place: the parity engine launches each variant twice
over poisoned outputs and bench replays a variant thousands of times; an in-place update would make every
launch start from the previous one's result, so neither the poison check nor the timing would see the same
inputs twice. The kernels allow R_out == R_in (each element is read, then written, by one thread), which
is how an engine calls them; the harness passes two buffers so every launch is the same computation.
Input padding (ld > H) is NaN, so a kernel that read it would write NaN and fail the finite check.

Float64 references (derivation: docs/ARITHMETIC_Q2WARP_FUSED.md, section C3), each element checked against its
own bound (u = 2^-24):
- R_out: e_R = |beta| e_c (1 + u) + u |R|, e_c = gamma_{K+1} (sum_k |w_k Y_k| + |S|).
- rs: rs * (rho + u (1 + rho)), rho the relative bound of mean(x^2) + eps propagated from
  e_x = gamma_4 sum_r |alpha_r| (|R_r| + e_R) + sum_r |alpha_r| e_R, the fp32 sum of squares
  (gamma_{H/256+12}) and the division and the eps addition.
- xn16: halfulp16(|y| + e_y) + e_y, e_y from e_x and the rs bound and the two fp32 products.
- "xn16+lo" (derived output: float(xn16) + float(xn16_lo), needs the engine's output_values hook):
  halfulp16(halfulp16(|y| + e_y)) + e_y, since y - xn16 is exact in fp32 and xn16_lo rounds it once.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from strata_bench.kit import (U32, U64, AbiArg, Case, Expected, Family, InputError, LaunchAbi, Variant, fp16_half_ulp,
                              gamma, parse_data)

from strata_bench.kernels.constants import MOE_THREADS as THREADS
from strata_bench.kernels.constants import MOE_RESIDUAL_ROWS as RESIDUAL_ROWS
FUSED_TOPK = (8,)  # fused kernel instances: TOPK x EPT (H = 256 * EPT)
FUSED_EPT = (8, 16)
DEFAULT_EPS = 1e-6


class MoeCombine(Family):
    name = "moe_combine"
    ceiling = 'copy'
    sources = ("moe_combine/moe_combine.cu",)
    description = "MoE combine + 4-row residual + RMS norm (fp16 hi/lo): two kernels vs fused, bitwise"

    # --- cases ------------------------------------------------------------------------------------
    def default_cases(self) -> Iterable[Case]:
        case = self.tokens_case
        return [
            case(1, "seed:1", True), case(1, "seed:1", False),
            case(333, "seed:2", True), case(333, "seed:2", False),
            case(1000, "seed:3", True),
            case(517, "seed:4", True, ld=2048 + 64), case(517, "seed:4", False, ld=2048 + 64),
            case(333, "edge:5", True),  # a zero token (x = 0, rs = 1/sqrt(eps)) and a 1e3-scale token
            case(3, "seed:6", True, hidden=4096), case(3, "seed:6", False, hidden=4096),  # the widest fused: EPT 16
        ]

    def bench_cases(self) -> Iterable[Case]:
        return [self.tokens_case(t, "seed:1", lo) for t in (1000, 4096) for lo in (True, False)]

    def tokens_case(self, tokens: int, data: str, lo: bool, hidden: int = 2048, topk: int = 8,
                    ld: int | None = None) -> Case:
        """T tokens of hidden size H and top-k K; `lo` also writes xn16_lo; `ld` the token stride."""
        params: dict[str, Any] = {"lo": int(lo)}
        if ld is not None:
            params["ld"] = ld
        return self.case("f32", tokens, hidden, topk, data, **params)

    @staticmethod
    def geometry(case: Case) -> dict[str, Any]:
        hidden, topk = case.cols, case.ncols
        ld = int(case.param("ld", hidden))
        if hidden <= 0 or hidden % THREADS:
            raise InputError(f"moe_combine: hidden size must be a positive multiple of {THREADS}, got {hidden}")
        if topk < 1 or ld < hidden:
            raise InputError(f"moe_combine: bad top-k {topk} or token stride {ld} (< hidden {hidden})")
        return {"T": case.rows, "H": hidden, "K": topk, "ld": ld, "lo": bool(case.param("lo", 0)),
                "eps": float(case.param("eps", DEFAULT_EPS))}

    # --- data -------------------------------------------------------------------------------------
    def make_inputs(self, case: Case) -> dict[str, Any]:
        geo = self.geometry(case)
        return _inputs(geo["T"], geo["H"], geo["K"], geo["ld"], case.data)  # shared by lo on/off, cached

    @staticmethod
    def _draw(t: int, h: int, k: int, ld: int, data: str) -> dict[str, Any]:
        src = parse_data(data)
        if src.kind == "fixture":
            raise InputError("moe_combine: cases use seed:N or edge:N data")
        rng = np.random.default_rng(src.seed)
        raw_w = rng.random((t, k), dtype=np.float32) + np.float32(0.05)
        w = (raw_w / raw_w.sum(axis=1, keepdims=True)).astype(np.float32)  # router weights, sum ~1
        y = _padded(rng.standard_normal((t, k, h), dtype=np.float32), ld)
        s = _padded(rng.standard_normal((t, h), dtype=np.float32), ld)
        r_in = _padded(rng.standard_normal((RESIDUAL_ROWS, t, h), dtype=np.float32) * np.float32(2), ld)
        beta = rng.uniform(0.5, 1.5, (RESIDUAL_ROWS, t)).astype(np.float32)
        alpha = rng.uniform(0.1, 0.5, (RESIDUAL_ROWS, t)).astype(np.float32)
        g = (1 + 0.1 * rng.standard_normal(h)).astype(np.float32)
        if src.edge:
            y[0, :, :h], s[0, :h], r_in[:, 0, :h] = 0.0, 0.0, 0.0
            if t > 1:
                y[1, :, :h] *= np.float32(1e3)
                r_in[:, 1, :h] *= np.float32(1e3)
        return {"w": w, "Y": y, "S": s, "R_in": r_in, "beta": beta, "alpha": alpha, "g": g}

    def to_device(self, case: Case, host: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        return {name: cupy.asarray(arr) for name, arr in host.items()}

    def alloc_outputs(self, case: Case, dev: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        geo = self.geometry(case)
        t, ld = geo["T"], geo["ld"]
        outs = {"R_out": cupy.empty((RESIDUAL_ROWS, t, ld), dtype=cupy.float32),
                "rs": cupy.empty(t, dtype=cupy.float32),
                "xn16": cupy.empty((t, ld), dtype=cupy.float16)}
        if geo["lo"]:
            outs["xn16_lo"] = cupy.empty((t, ld), dtype=cupy.float16)
        return outs

    def written_mask(self, case: Case, output: str) -> Any:
        geo = self.geometry(case)
        if geo["ld"] == geo["H"] or output == "rs":
            return None
        shape = (RESIDUAL_ROWS, geo["T"], geo["ld"]) if output == "R_out" else (geo["T"], geo["ld"])
        mask = np.zeros(shape, dtype=bool)
        mask[..., : geo["H"]] = True
        return mask

    # --- launch -----------------------------------------------------------------------------------
    def _old_kernels(self, source: str) -> list[str]:
        return ["moe_combine_residual", "rms_norm_residual4<true>", "rms_norm_residual4<false>"]

    def _new_kernels(self, source: str) -> list[str]:
        return [f"moe_combine_norm_fused<{e}, {k}, {lo}>" for e in FUSED_EPT for k in FUSED_TOPK
                for lo in ("true", "false")]

    @staticmethod
    def _scalars(geo: Mapping[str, Any]) -> tuple[Any, ...]:
        """(t, h, k, ld, eps, lo) as the kernels take them; lo is the template argument's spelling."""
        return (np.int32(geo["T"]), np.int32(geo["H"]), np.int32(geo["K"]), np.int64(geo["ld"]),
                np.float32(geo["eps"]), "true" if geo["lo"] else "false")

    def _launch_old(self, case: Case, kernels: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
                    stream: Any = None) -> None:
        geo = self.geometry(case)
        t, h, k, ld, eps, lo = self._scalars(geo)
        xn_lo = outs["xn16_lo"] if geo["lo"] else None  # cupy passes None as a null pointer
        grid, block = (geo["T"],), (THREADS,)
        kernels.get("moe_combine_residual")(grid, block, (dev["w"], dev["Y"], dev["S"], dev["beta"], dev["R_in"],
                                                          outs["R_out"], t, h, k, ld), stream=stream)
        kernels.get(f"rms_norm_residual4<{lo}>")(grid, block, (outs["R_out"], dev["alpha"], dev["g"], eps, t, h, ld,
                                                               outs["rs"], outs["xn16"], xn_lo), stream=stream)

    def _launch_new(self, case: Case, kernels: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
                    stream: Any = None) -> None:
        geo = self.geometry(case)
        t, _, _, ld, eps, lo = self._scalars(geo)
        xn_lo = outs["xn16_lo"] if geo["lo"] else None
        ept = geo["H"] // THREADS
        if ept not in FUSED_EPT or geo["K"] not in FUSED_TOPK:
            raise InputError(f"moe_combine: no fused instance for H={geo['H']}, K={geo['K']} "
                             f"(H/256 in {FUSED_EPT}, K in {FUSED_TOPK})")
        fn = kernels.get(f"moe_combine_norm_fused<{ept}, {geo['K']}, {lo}>")
        fn((geo["T"],), (THREADS,), (dev["w"], dev["Y"], dev["S"], dev["beta"], dev["alpha"], dev["g"], eps,
                                     dev["R_in"], outs["R_out"], t, ld, outs["rs"], outs["xn16"], xn_lo), stream=stream)

    variants = (
        Variant("old", _old_kernels, _launch_old, "combine + residual, then RMS norm: R through memory"),
        Variant("new", _new_kernels, _launch_new, "one fused kernel per token"),
    )

    def launch_abi(self) -> LaunchAbi:
        """What a TOML variant receives (docs/ABI.md, "moe_combine"): one or several launches."""
        return MOE_COMBINE_ABI

    # --- reference --------------------------------------------------------------------------------
    def output_values(self, case: Case, name: str, outputs: Mapping[str, Any]) -> np.ndarray:
        """An output as it is (the check widens it to float64 as it reads it), or "xn16+lo": float(xn16) +
        float(xn16_lo), exact in float64."""
        if name == "xn16+lo":
            return outputs["xn16"].astype(np.float64) + outputs["xn16_lo"].astype(np.float64)
        return outputs[name]

    def reference(self, case: Case, host: Mapping[str, Any]) -> list[Expected]:
        geo = self.geometry(case)
        key = (geo["T"], geo["H"], geo["K"], geo["ld"], case.data)
        if host is _inputs(*key):
            ref = _reference(*key, geo["eps"])
        else:
            ref = moe_reference(host, geo["H"], geo["eps"])
        return expected(ref, geo["ld"], geo["lo"])

    def describe_index(self, case: Case, output: str, index: tuple[int, ...]) -> str:
        if output == "R_out":
            r, t, i = index
            return f"residual row {r}, token {t}, element {i}"
        if output == "rs":
            return f"token {index[0]}"
        t, i = index
        return f"token {t}, element {i}"

    def bytes_moved(self, case: Case) -> int:
        geo = self.geometry(case)
        t, h, k = geo["T"], geo["H"], geo["K"]
        reads = 4 * (t * k + t * k * h + t * h + 2 * RESIDUAL_ROWS * t + h + RESIDUAL_ROWS * t * h)
        writes = 4 * (RESIDUAL_ROWS * t * h + t) + 2 * t * h * (2 if geo["lo"] else 1)
        return reads + writes


# --- the launch ABI of TOML variants (docs/ABI.md) ------------------------------------------------------
def _abi_fields(case: Case) -> dict[str, int]:
    geo = MoeCombine.geometry(case)
    return {"tokens": geo["T"], "hidden": geo["H"], "topk": geo["K"], "ld": geo["ld"], "ept": geo["H"] // THREADS}


def _geo(name: str, cast: Any) -> Any:
    return lambda c, d, o: cast(MoeCombine.geometry(c)[name])


MOE_COMBINE_ABI = LaunchAbi(
    family="moe_combine",
    args=(
        AbiArg("w", "const float*", "[tokens][topk] router weights, contiguous", lambda c, d, o: d["w"]),
        AbiArg("Y", "const float*", "[tokens][topk][ld] expert outputs: hidden values then ld - hidden NaN "
                                    "padding (never to be read)", lambda c, d, o: d["Y"]),
        AbiArg("S", "const float*", "[tokens][ld] shared-expert output, NaN padding", lambda c, d, o: d["S"]),
        AbiArg("beta", "const float*", f"[{RESIDUAL_ROWS}][tokens] residual update scales", lambda c, d, o: d["beta"]),
        AbiArg("alpha", "const float*", f"[{RESIDUAL_ROWS}][tokens] residual mix weights of the norm input",
               lambda c, d, o: d["alpha"]),
        AbiArg("g", "const float*", "[hidden] RMS norm gains", lambda c, d, o: d["g"]),
        AbiArg("eps", "float", "RMS norm epsilon (case param eps)", _geo("eps", np.float32)),
        AbiArg("R_in", "const float*", f"[{RESIDUAL_ROWS}][tokens][ld] residual rows in, NaN padding",
               lambda c, d, o: d["R_in"]),
        AbiArg("R_out", "float*", f"[{RESIDUAL_ROWS}][tokens][ld] residual rows out: the first hidden of each row "
                                  "written, padding never (an earlier launch's output may be a later one's input)",
               lambda c, d, o: o["R_out"]),
        AbiArg("tokens", "int", "token rows (T)", _geo("T", np.int32)),
        AbiArg("hidden", "int", "hidden size (H, a multiple of 256)", _geo("H", np.int32)),
        AbiArg("topk", "int", "experts per token (K)", _geo("K", np.int32)),
        AbiArg("ld", "long long", "floats (and halves) from one token row to the next (>= hidden)",
               _geo("ld", np.int64)),
        AbiArg("rs", "float*", "[tokens] 1/sqrt(mean(x^2) + eps), every element written", lambda c, d, o: o["rs"]),
        AbiArg("xn16", "__half*", "[tokens][ld] fp16 normed rows, the first hidden of each written, padding never",
               lambda c, d, o: o["xn16"]),
        AbiArg("xn16_lo", "__half*", "[tokens][ld] fp16 remainder (xn - xn16), as xn16; a null pointer when the "
                                     "case's lo is 0", lambda c, d, o: o.get("xn16_lo")),
    ),
    field_names=("tokens", "hidden", "topk", "ld", "ept"),
    fields=_abi_fields,
    placeholder_sets=tuple({"lo": lo, "ept": str(e), "topk": str(k)} for e in FUSED_EPT for k in FUSED_TOPK
                           for lo in ("true", "false")),
    placeholders=lambda case: {"lo": "true" if MoeCombine.geometry(case)["lo"] else "false",
                               "ept": str(case.cols // THREADS), "topk": str(case.ncols)},
    baseline="old",
    writes="R_out, rs, xn16 (and xn16_lo when lo is 1): every element but the padding; bitwise equal to old "
           "(moe_combine.cu's ARITHMETIC CONTRACT)",
)


def expected(ref: Mapping[str, Any], ld: int, lo: bool) -> list[Expected]:
    """A case's references from moe_reference's result (the family's arithmetic, or another's), its outputs'
    rows padded to `ld`; xn16 + xn16_lo where `lo`."""
    # Padding is NaN in the references (an unwritten element must stay poison, matched exactly), so its
    # bound is never read; 0 keeps the bound arrays finite.
    out = [
        Expected("R_out", _padded(ref["R"], ld, fill=np.nan), _padded(ref["bound_R"], ld, fill=0.0), label="f64",
                 why="|beta| gamma_{K+1}(sum|w Y| + |S|)(1+u) + u|R|"),
        Expected("rs", ref["rs"], ref["bound_rs"], label="f64",
                 why="rs (rho + u(1+rho)), rho from x's bound, gamma_{H/256+12} sum x^2, / H, + eps"),
        Expected("xn16", _padded(ref["y"], ld, fill=np.nan), _padded(ref["bound_xn"], ld, fill=0.0), label="f64",
                 why="halfulp16(|y| + e_y) + e_y"),
    ]
    if lo:
        out.append(Expected("xn16+lo", _padded(ref["y"], ld, fill=np.nan), _padded(ref["bound_pair"], ld, fill=0.0),
                            label="f64 hi+lo",
                            why="halfulp16(halfulp16(|y| + e_y)) + e_y: y - xn16 exact, rounded once"))
    return out


@dataclass(frozen=True)
class NormArithmetic:
    """What the bounds take from the device's arithmetic (another one's, a foreign variant's error model):
    - product_rel: relative rounding of beta c where R = Rin + beta c is not one fma (0: moe_combine.cu's fma);
    - flush: absolute error of a result flushed to zero (0: no flush);
    - sum_depth(H): roundings along the fp32 sum of squares' deepest path (moe_combine.cu: H / 256 + 12);
    - div_rel, rsqrt_rel: relative error of mean = sum / H and of rs = 1/sqrt(mean + eps) (u: correctly
      rounded)."""

    product_rel: float
    flush: float
    sum_depth: Callable[[int], int]
    div_rel: float
    rsqrt_rel: float


# moe_combine.cu: thread chain + 5 butterfly + 7 cross-warp adds; IEEE division and __frsqrt_rn
BUILT_IN = NormArithmetic(0.0, 0.0, lambda hidden: hidden // THREADS + 12, U32, U32)


@functools.lru_cache(maxsize=2)
def _inputs(t: int, h: int, k: int, ld: int, data: str) -> dict[str, Any]:
    inputs = MoeCombine._draw(t, h, k, ld, data)
    for arr in inputs.values():
        arr.setflags(write=False)  # shared by the cases with and without xn16_lo
    return inputs


@functools.lru_cache(maxsize=2)
def _reference(t: int, h: int, k: int, ld: int, data: str, eps: float) -> dict[str, Any]:
    return moe_reference(_inputs(t, h, k, ld, data), h, eps)


def _padded(a: np.ndarray, ld: int, fill: float = np.nan) -> np.ndarray:
    """Pad the last axis to ld with `fill` (NaN: inputs a kernel must not read, outputs it must not write)."""
    if a.shape[-1] == ld:
        return np.ascontiguousarray(a)
    out = np.full(a.shape[:-1] + (ld,), fill, dtype=a.dtype)
    out[..., : a.shape[-1]] = a
    return out


REF_CHUNK_TOKENS = 64  # tokens per reference chunk: keeps the float64 temporaries cache-sized


def moe_reference(inp: Mapping[str, Any], hidden: int, eps: float,
                  arithmetic: NormArithmetic = BUILT_IN) -> dict[str, Any]:
    """Float64 R, rs, y = x * rs * g, each element's bound of the kernels' fp32 results (bound_R, bound_rs,
    bound_xn, bound_pair; see the docstring) for `arithmetic`, and the largest of each (tol_R, tol_rs,
    tol_xn, tol_pair)."""
    tokens = inp["w"].shape[0]
    parts = []
    for t0 in range(0, tokens, REF_CHUNK_TOKENS):
        t = slice(t0, min(tokens, t0 + REF_CHUNK_TOKENS))
        chunk = {"w": inp["w"][t], "Y": inp["Y"][t], "S": inp["S"][t], "R_in": inp["R_in"][:, t],
                 "beta": inp["beta"][:, t], "alpha": inp["alpha"][:, t], "g": inp["g"]}
        parts.append(_moe_reference_chunk(chunk, hidden, eps, arithmetic))
    out = {k: np.concatenate([p[k] for p in parts], axis=1) for k in ("R", "bound_R")}
    out.update({k: np.concatenate([p[k] for p in parts]) for k in ("rs", "y", "bound_rs", "bound_xn", "bound_pair")})
    out.update({f"tol_{k}": float(out[f"bound_{k}"].max()) for k in ("R", "rs", "xn", "pair")})
    return out


def _moe_reference_chunk(inp: Mapping[str, Any], hidden: int, eps: float, arith: NormArithmetic) -> dict[str, Any]:
    w, beta, alpha, g = (np.asarray(inp[k], dtype=np.float64) for k in ("w", "beta", "alpha", "g"))
    s = np.asarray(inp["S"][..., :hidden], dtype=np.float64)
    r_in = np.asarray(inp["R_in"][..., :hidden], dtype=np.float64)
    topk = w.shape[1]
    # One expert slice at a time (products of two floats are exact in float64); a float64 copy of the
    # whole Y would cost more than the arithmetic.
    c, sum_abs = s.copy(), np.abs(s)
    for k in range(topk):
        y_k = inp["Y"][:, k, :hidden].astype(np.float64)
        c += w[:, k, None] * y_k
        sum_abs += np.abs(w[:, k, None]) * np.abs(y_k)
    e_c = (float(gamma(topk + 1)) + (topk + 1) * U64) * sum_abs + arith.flush
    r = r_in + beta[:, :, None] * c[None]
    bc = np.abs(beta)[:, :, None] * (np.abs(c) + e_c)[None]  # |beta c| of the device's c, for a separate product
    e_r = (np.abs(beta)[:, :, None] * e_c[None] * (1 + U32) + U32 * np.abs(r) + 4 * U64 * np.abs(r)
           + arith.product_rel * bc + arith.flush)
    a = np.abs(alpha)[:, :, None]
    x = (alpha[:, :, None] * r).sum(axis=0)
    e_x = float(gamma(4)) * (a * (np.abs(r) + e_r)).sum(axis=0) + (a * e_r).sum(axis=0) + arith.flush
    sumsq = (x * x).sum(axis=1)
    e_sum = (float(gamma(arith.sum_depth(hidden))) * ((np.abs(x) + e_x) ** 2).sum(axis=1)
             + (e_x * (2 * np.abs(x) + e_x)).sum(axis=1) + hidden * U64 * sumsq + hidden * arith.flush)
    v = sumsq / hidden + eps
    e_v = e_sum / hidden + arith.div_rel * (sumsq + e_sum) / hidden + U32 * (v + e_sum / hidden)
    rho = e_v / v
    rs = 1.0 / np.sqrt(v)
    e_rs = rs * (rho + arith.rsqrt_rel * (1 + rho))
    y = x * rs[:, None] * g
    rs_hi = (rs + e_rs)[:, None]
    e_y = (float(gamma(2)) * np.abs(g) * (np.abs(x) + e_x) * rs_hi
           + np.abs(g) * (e_x * rs_hi + np.abs(x) * e_rs[:, None]) + 4 * U64 * np.abs(y) + arith.flush)
    y_hi = np.abs(y) + e_y
    return {"R": r, "rs": rs, "y": y, "bound_R": e_r, "bound_rs": e_rs, "bound_xn": fp16_half_ulp(y_hi) + e_y,
            "bound_pair": fp16_half_ulp(fp16_half_ulp(y_hi)) + e_y}
