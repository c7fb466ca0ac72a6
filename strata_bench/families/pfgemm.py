"""pfgemm: FP16 tensor-core prompt-expert GEMM (nvcuda::wmma) over token rows sorted by expert.

For expert e and each token row t of its group (offsets[e] <= t < offsets[e+1]):
    Y[t, n] = sum_k X[t, k] * W_e[n, k]
with X fp16 (T, K), W_e the expert's N quantized rows of K values, fp32 accumulation and fp32 output.

Kernels (kernels_src/pfgemm/, each states its ARITHMETIC CONTRACT):
- "old": pfgemm_old.cu, the existing kernel: a K chunk of 128 of a block's 128 weight rows is dequantized
  to fp16 in shared memory, then wmma 16x16x16. IQ2_S, IQ4_NL and Q2_0.
- "new": pfgemm_new.cu, for IQ2_S (K % 512 == 0) and IQ4_NL (K % 128 == 0) with N % 128 == 0: 128 weight
  rows x 64 tokens per block, raw weight stages in shared memory, one 32-value sub-block per thread per
  stage, register-staged pipelining.
- "auto": the one entry point a production engine calls: `choose_kernel` takes "new" where it applies,
  "old" everywhere else; STRATA_PF_WMMA2=1 forces new (an InputError where new cannot run), =0 forces
  old. `ran` records which kernel each (case, variant) launched.

Parity: tensor-core accumulation order is the hardware's, so variants are not compared bit for bit
(compared_outputs() is empty); each is checked against the float64 reference (exact weights x the fp16
activations) within the tolerance derived in docs/PFGEMM.md, and errors_must_match() makes the engine
require the same max |err| for every variant: both kernels feed identical fp16 weights and activations
to the same accumulator chain in the same k order.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping

import numpy as np

from strata_bench.kit import (Case, Expected, Family, FixtureRef, InputError, LaunchAbi, Variant, ceil_div,
                              parse_data)

from strata_bench.families.pfgemm_groups import FAMILY, GROUPS_A, group_sizes, group_sizes_of, token_tiles
from strata_bench.kernels.constants import PFGEMM_FORMAT_IDS as FORMAT_IDS
NEW_FORMATS = {"iq2_s": 512, "iq4_nl": 128}  # format -> K multiple the new kernel needs
from strata_bench.kernels.constants import PFGEMM_OLD_ROWS as OLD_ROWS, PFGEMM_OLD_TILE_ROWS as OLD_TILE_ROWS  # noqa: E402
from strata_bench.kernels.constants import PFGEMM_NEW_ROWS as NEW_ROWS, PFGEMM_NEW_TILE_ROWS as NEW_TILE_ROWS  # noqa: E402
from strata_bench.kernels.constants import PFGEMM_THREADS as THREADS  # noqa: E402
ENV_SWITCH = "STRATA_PF_WMMA2"
ACT_SEED_OFFSET = 4099  # activations get their own stream, independent of the weights
FIXTURE_ROLL = 7  # expert e's rows are the tiled fixture rows rolled by 7e, so experts differ

# Uneven groups beside GROUPS_A (pfgemm_groups.py):
GROUPS_B = "70,0,3,129,0,16,48,1"  # leading large group, empties in the middle, 129 = 2 tiles + 1 row
BENCH_GROUPS = "64x128"  # 8192 token rows over 128 experts
FIXTURE_TILE_ROWS = 256  # a fixture case's N: the fixture's rows tiled to a multiple of this
FIXTURE_GROUPS = {"iq2_s": GROUPS_A, "iq4_nl": GROUPS_B}

# Tolerance constants (docs/PFGEMM.md): fp16 rounding of a weight (relative 2^-11 for normal results,
# absolute 2^-25 below 2^-14), and truncating tensor-core accumulation: at most 2^-22 of the running
# magnitude per k value, i.e. K * 2^-22 * sum_k |x_k w16_k| over the whole sum.
FP16_REL = 2.0 ** -11
FP16_SUBNORMAL_ABS = 2.0 ** -25
TC_ACC_PER_TERM = 2.0 ** -22
F64_REL = 2.0 ** -53


# --- which kernel ---------------------------------------------------------------------------------------
def old_supports(fmt: str, n: int, k: int) -> bool:
    """The existing kernel: its three formats, 16-row weight fragments and 32-value k chunks."""
    from strata_bench.formats import get_format

    return fmt in FORMAT_IDS and n % 16 == 0 and k > 0 and k % 32 == 0 and k % get_format(fmt).block_size == 0


def new_supports(fmt: str, n: int, k: int) -> bool:
    """The second kernel: IQ2_S with K % 512 == 0 (4-byte aligned rows), IQ4_NL with K % 128 == 0, N % 128."""
    return fmt in NEW_FORMATS and k > 0 and k % NEW_FORMATS[fmt] == 0 and n > 0 and n % NEW_ROWS == 0


def choose_kernel(fmt: str, n: int, k: int, env: Mapping[str, str] | None = None) -> str:
    """The dispatcher behind the single entry point: "new" where it applies, else "old";
    STRATA_PF_WMMA2=1 forces "new", =0 forces "old"."""
    env = os.environ if env is None else env
    switch = env.get(ENV_SWITCH, "").strip()
    if switch not in ("", "0", "1"):
        raise InputError(f"{ENV_SWITCH} must be 0 or 1, got {switch!r}")
    if switch == "1" and not new_supports(fmt, n, k):
        raise InputError(f"{ENV_SWITCH}=1 but the new kernel does not support {fmt} {n}x{k} "
                         f"(IQ2_S needs K % 512 == 0, IQ4_NL K % 128 == 0, both N % 128 == 0)")
    if switch == "0" or (switch == "" and not new_supports(fmt, n, k)):
        return "old"
    return "new"


def kernel_expression(kernel: str, fmt: str) -> str:
    """The name expression of kernel "old" or "new" for a format."""
    return f"pfgemm_{kernel}<{FORMAT_IDS[fmt]}>"


# --- the variants: which kernel each launches for a case ---------------------------------------------------
def _choose_old(case: Case) -> str:
    return "old"


def _choose_new(case: Case) -> str:
    if not new_supports(case.fmt, case.rows, case.cols):
        raise InputError(f"pfgemm: the new kernel does not support {case.fmt} {case.rows}x{case.cols}")
    return "new"


def _choose_auto(case: Case) -> str:
    return choose_kernel(case.fmt, case.rows, case.cols)


@dataclass(frozen=True)
class _Launch:
    """A variant's launch: the kernel `choose(case)` names ("old" or "new"), recorded in PfGemm.ran."""

    variant: str
    choose: Callable[[Case], str]

    def __call__(self, family: "PfGemm", case: Case, kernels: Any, dev: Mapping[str, Any],
                 outs: Mapping[str, Any], stream: Any = None) -> None:
        family._run(case, self.variant, self.choose(case), kernels, dev, outs, stream)


def _variant(name: str, choose: Callable[[Case], str], kinds: tuple[str, ...], description: str) -> Variant:
    return Variant(name, lambda family, source: family.kernels_in(source, kinds), _Launch(name, choose), description)


class PfGemm(Family):
    name = FAMILY
    ceiling = None
    sources = ("pfgemm/pfgemm_old.cu", "pfgemm/pfgemm_new.cu")
    description = "FP16 wmma grouped expert GEMM over sorted tokens: dequantize-to-smem (old) vs pipelined (new)"

    def __init__(self) -> None:
        self.ran: dict[tuple[str, str], str] = {}  # (case name, variant) -> kernel name expression launched

    # --- variants: what each launches (the kernel expressions its kernels compile) ---------------------
    variants = (
        _variant("old", _choose_old, ("old",), "the existing kernel: dequantize a K chunk to fp16 in shared memory"),
        _variant("new", _choose_new, ("new",), "raw weight stages in shared memory, register-staged pipelining"),
        _variant("auto", _choose_auto, ("old", "new"), "the production entry point: choose_kernel decides"),
    )

    def launch_abi(self) -> LaunchAbi:
        """What a TOML variant receives (docs/ABI.md, "pfgemm"; declared in pfgemm_abi.py)."""
        from strata_bench.families.pfgemm_abi import PFGEMM_ABI  # the ABI's table, kept beside this file

        return PFGEMM_ABI

    @staticmethod
    def kernels_in(source: str, kinds: tuple[str, ...]) -> list[str]:
        """The name expressions of the kernels `kinds` ("old", "new") that `source` holds (none for a source a
        run added: a TOML variant's, an engine's)."""
        if source.endswith("pfgemm_old.cu"):
            return [kernel_expression("old", f) for f in FORMAT_IDS] if "old" in kinds else []
        if source.endswith("pfgemm_new.cu"):
            return [kernel_expression("new", f) for f in NEW_FORMATS] if "new" in kinds else []
        return []

    # --- cases ------------------------------------------------------------------------------------
    def expert_case(self, fmt: str, n: int, k: int, groups: str, data: str = "seed:1",
                    variants: tuple[str, ...] | None = None, bench: bool = False) -> Case:
        """N weight rows of K values per expert over token groups `groups` ("a,b,c" or "GxE")."""
        params: dict[str, Any] = {"groups": groups, **({"bench": True} if bench else {})}
        tokens = int(group_sizes_of(groups).sum())
        if variants is not None:  # the variants a run added (TOML's, an engine's) join wherever they run
            builtin = {v.name for v in PfGemm.variants}
            runnable = self.case(fmt, n, k, tokens, data, **params).variants
            variants = (*variants, *(v for v in runnable if v not in builtin))
        return self.case(fmt, n, k, tokens, data, variants, **params)

    def default_cases(self) -> Iterable[Case]:
        case = self.expert_case
        return [
            case("iq2_s", 1280, 2560, GROUPS_A),                       # gate/up
            case("iq2_s", 2560, 1024, GROUPS_B, "seed:2"),             # down-like (K=640 is no IQ2_S row)
            case("iq2_s", 256, 768, GROUPS_A, "seed:3", ("old", "auto")),    # K % 512 != 0: auto -> old
            case("iq4_nl", 1280, 2560, GROUPS_B, "seed:4"),
            case("iq4_nl", 2560, 640, GROUPS_A, "seed:5"),             # down
            case("iq4_nl", 256, 608, GROUPS_B, "seed:6", ("old", "auto")),   # K % 128 != 0: auto -> old
            case("iq4_nl", 144, 512, GROUPS_A, "seed:9", ("old", "auto")),   # N % 128 != 0: auto -> old
            case("q2_0", 1280, 2560, GROUPS_A, "seed:7", ("old", "auto")),
            case("q2_0", 2560, 640, GROUPS_B, "seed:8", ("old", "auto")),
            *self.fixture_cases(FixtureRef("smollm2-ffn_down.iq2_s", "iq2_s", 64, 1536)),
            *self.fixture_cases(FixtureRef("smollm2-ffn_down.iq4_nl", "iq4_nl", 64, 1536)),
        ]

    def fixture_cases(self, fixture: FixtureRef, ncols: tuple[int, ...] | None = None,
                      fmt: str | None = None) -> list[Case]:
        """Every expert's weights are the fixture's rows (tiled to a multiple of FIXTURE_TILE_ROWS,
        rolled per expert) over the family's token groups (entries come from the groups, not --cols)."""
        fmt = fmt or fixture.fmt
        if fmt not in FORMAT_IDS or fmt != fixture.fmt:
            return []
        rows = -(-fixture.rows // FIXTURE_TILE_ROWS) * FIXTURE_TILE_ROWS
        new_ok = fmt in NEW_FORMATS and fixture.cols % NEW_FORMATS[fmt] == 0
        return [self.expert_case(fmt, rows, fixture.cols, FIXTURE_GROUPS.get(fmt, GROUPS_A), fixture.data,
                                 None if new_ok else ("old", "auto"))]

    def bench_cases(self) -> Iterable[Case]:
        """8192 token rows over 128 experts (issue 6): IQ2_S gate/up 1280 x 2560, IQ4_NL down 2560 x 1280,
        and IQ4_NL at the gate/up shape."""
        case = self.expert_case
        return [
            case("iq2_s", 1280, 2560, BENCH_GROUPS, bench=True),
            case("iq4_nl", 2560, 1280, BENCH_GROUPS, bench=True),
            case("iq4_nl", 1280, 2560, BENCH_GROUPS, bench=True),
        ]

    def compared_outputs(self, case: Case) -> tuple[str, ...] | None:
        return ()  # tensor-core sums: checked by equal max |err| against float64, not bit for bit

    def errors_must_match(self, case: Case) -> bool:
        return True

    # --- data -------------------------------------------------------------------------------------
    def _check(self, case: Case) -> np.ndarray:
        sizes = group_sizes(case)
        if case.fmt not in FORMAT_IDS:
            raise InputError(f"pfgemm: format {case.fmt!r} has no kernel; formats: {', '.join(FORMAT_IDS)}")
        if not old_supports(case.fmt, case.rows, case.cols):
            raise InputError(f"pfgemm: shape {case.rows}x{case.cols} unsupported (N % 16 == 0 and K a multiple "
                             f"of 32 and of the {case.fmt} block needed)")
        if int(sizes.sum()) != case.ncols:
            raise InputError(f"pfgemm: groups sum to {int(sizes.sum())} token rows, the case says {case.ncols}")
        return sizes

    def make_inputs(self, case: Case) -> dict[str, Any]:
        sizes = self._check(case)
        src = parse_data(case.data)
        if src.edge:
            raise InputError("pfgemm: edge data has fp16-overflowing weights (65504 scales); "
                             "use seed:N or fixture:NAME")
        experts = sizes.size
        weights = _weights(case, src, experts)
        seed = src.seed if src.kind == "seed" else 0
        x = np.random.default_rng(seed + ACT_SEED_OFFSET).standard_normal((case.ncols, case.cols), dtype=np.float32)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
        return {"x": x.astype(np.float16), "w": weights, "offsets": offsets, "sizes": sizes}

    def to_device(self, case: Case, host: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        return {"x": cupy.asarray(host["x"]), "w": cupy.asarray(host["w"]),
                "offsets": cupy.asarray(host["offsets"]), "experts": int(host["sizes"].size),
                "tiles_old": token_tiles(host["sizes"], OLD_TILE_ROWS),
                "tiles_new": token_tiles(host["sizes"], NEW_TILE_ROWS)}

    def alloc_outputs(self, case: Case, dev: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        return {"y": cupy.empty((case.ncols, case.rows), dtype=cupy.float32)}

    # --- launch -----------------------------------------------------------------------------------
    def kernel_for(self, case: Case, variant: str) -> str:
        """"old" or "new": what a variant launches for this case (auto asks the dispatcher)."""
        return self.variant(variant).launch.choose(case)

    def _run(self, case: Case, variant: str, kernel: str, kernels: Any, dev: Mapping[str, Any],
             outs: Mapping[str, Any], stream: Any) -> None:
        expr = kernel_expression(kernel, case.fmt)
        self.ran[(case.name, variant)] = expr
        rows_per_block = OLD_ROWS if kernel == "old" else NEW_ROWS
        tiles = dev["tiles_old"] if kernel == "old" else dev["tiles_new"]
        if tiles == 0:
            return  # no token rows at all: nothing to write
        args = (dev["x"], dev["w"], dev["offsets"], outs["y"], np.int32(case.rows), np.int32(case.cols),
                np.int32(dev["experts"]))
        grid = (ceil_div(case.rows, rows_per_block), tiles)
        kernels.get(expr)(grid, (THREADS,), args, stream=stream)

    # --- reference ----------------------------------------------------------------------------------
    def reference(self, case: Case, host: Mapping[str, Any]) -> list[Expected]:
        ref, bound = pf_reference(case.fmt, host["w"], host["x"], host["offsets"], case.rows, case.cols)
        return [Expected("y", ref, bound, label="f64",
                         why="fp16 weight rounding 2^-11|x||w| + 2^-25|x| + truncating tensor-core sums "
                             "K 2^-22 |x||w16| + float64's own K 2^-53 (docs/PFGEMM.md)")]

    def describe_index(self, case: Case, output: str, index: tuple[int, ...]) -> str:
        t, n = index
        offsets = np.concatenate([[0], np.cumsum(group_sizes(case))])
        e = int(np.searchsorted(offsets, t, side="right") - 1)
        return f"token row {t} (expert {e}, row {t - int(offsets[e])} of its group), weight row {n}"

    def bytes_moved(self, case: Case) -> int:
        """Weights of every expert with tokens (read once), fp16 activations, fp32 outputs, offsets."""
        from strata_bench.formats import get_format

        sizes = group_sizes(case)
        row_bytes = get_format(case.fmt).bytes_per_row(case.cols)
        return (int((sizes > 0).sum()) * case.rows * row_bytes + case.ncols * case.cols * 2
                + case.ncols * case.rows * 4 + (sizes.size + 1) * 4)

    def flops(self, case: Case) -> int:
        return 2 * case.ncols * case.rows * case.cols


# --- helpers ----------------------------------------------------------------------------------------
def _weights(case: Case, src, experts: int) -> np.ndarray:
    """(experts * N, bytes_per_row) uint8: seeded blocks, or a fixture's real rows tiled per expert."""
    from strata_bench.data.store import load_fixture
    from strata_bench.data.synthetic import synthetic_weights

    rows = experts * case.rows
    if src.kind != "fixture":
        return synthetic_weights(case.fmt, rows, case.cols, src.seed)
    fix = load_fixture(src.fixture)
    if fix.fmt != case.fmt or fix.cols != case.cols:
        raise InputError(f"pfgemm: fixture {src.fixture} is {fix.fmt} with {fix.cols} inputs per row; "
                         f"the case needs {case.fmt} with {case.cols}")
    tiled = np.tile(fix.raw, (math.ceil(case.rows / fix.rows) + 1, 1))
    per_expert = [np.roll(tiled, -FIXTURE_ROLL * e, axis=0)[: case.rows] for e in range(experts)]
    return np.ascontiguousarray(np.concatenate(per_expert))


def exact_weights(fmt: str, raw: np.ndarray) -> np.ndarray:
    """float64 exact weight values. For these three formats the oracle's float32 values are already exact
    (at most 22 significant bits, far from fp32's range limits: the kernels' ARITHMETIC CONTRACT), so
    the float32 oracle is used, twice as fast as the generic dequantize_f64; a test checks they agree."""
    from strata_bench.formats import get_format

    return get_format(fmt).dequantize(raw).astype(np.float64)


def _dequantize_fp16(fmt: str, raw: np.ndarray, chunk_rows: int = 4096) -> np.ndarray:
    """The kernels' fp16 weights: exact values rounded to nearest even (numpy's float64 -> float16),
    a chunk of rows at a time (the bench cases hold 327,680 rows)."""
    out = [exact_weights(fmt, raw[r:r + chunk_rows]).astype(np.float16) for r in range(0, raw.shape[0], chunk_rows)]
    return np.concatenate(out)


def expert_operands(fmt: str, raw: np.ndarray, x16: np.ndarray, offsets: np.ndarray, n: int,
                    k: int) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
    """(t0, t1, exact weights [n][k], float64 activations [t1 - t0][k]) of every expert with tokens, in order:
    what each expert's references and bounds (this family's and a foreign kernel's) are computed from."""
    from strata_bench.formats import get_format

    row_bytes = get_format(fmt).bytes_per_row(k)
    for e in range(len(offsets) - 1):
        t0, t1 = int(offsets[e]), int(offsets[e + 1])
        if t1 > t0:
            yield t0, t1, exact_weights(fmt, raw[e * n:(e + 1) * n].reshape(n, row_bytes)), \
                x16[t0:t1].astype(np.float64)


def pf_reference(fmt: str, raw: np.ndarray, x16: np.ndarray, offsets: np.ndarray, n: int,
                 k: int) -> tuple[np.ndarray, np.ndarray]:
    """Float64 reference of Y (T, N) and each element's bound of the kernels' error, expert by expert.

    Per element (docs/PFGEMM.md): |kernel - exact| <= 2^-11 sum|x||w| + 2^-25 sum|x|  (fp16 weights)
    + K 2^-22 sum|x||w16| (truncating tensor-core accumulation), and the float64 sum itself is within
    K 2^-53 sum|x||w| of exact.
    """
    total = int(offsets[-1])
    ref = np.zeros((total, n), dtype=np.float64)
    bound = np.zeros((total, n), dtype=np.float64)
    for t0, t1, w, x in expert_operands(fmt, raw, x16, offsets, n, k):
        w16 = w.astype(np.float16).astype(np.float64)
        ax = np.abs(x)
        ref[t0:t1] = x @ w.T
        abs_w = ax @ np.abs(w).T
        bound[t0:t1] = (FP16_REL + k * F64_REL) * abs_w + FP16_SUBNORMAL_ABS * ax.sum(axis=1, keepdims=True) \
            + k * TC_ACC_PER_TERM * (ax @ np.abs(w16).T)
    return ref, bound
