"""Copy a llama.cpp tree with one planted change, for the engine A/Bs of issue 36 (`gpu_suite.sh engine`).

    python scripts/engine_plant.py slow-mmvq TREE OUT   # mul_mat_vec_q launched once more every 10th call
    python scripts/engine_plant.py ulp-iq4_xs TREE OUT  # mul_mat_vec_q's iq4_xs dot one ulp larger

slow-mmvq: mmvq.cu's `mul_mat_vec_q_switch_type` becomes `..._impl`, and a wrapper of that name (a
variadic template, so it needs no copy of the parameter list) calls it, and every 10th call calls it again:
10% more mat-vec launches, each writing the same outputs (dst is written, not accumulated), so the tokens
stay identical. Under CUDA graphs the repeats are captured with the graph and replayed with it. Why 10, not
33: the A/B is judged on generation t/s, of which mul_mat_vec_q is only a part on a 270M model (about 400
other kernels a token); every 33rd call (3% more mat-vec work) moved tg128 by -0.7% [-2.8%, +1.7%] on an
H100 (issue 36, 10 pairs: under the run-to-run spread), so the plant is sized to about 3% of generation.
ulp-iq4_xs: mul_mat_vec_q's iq4_xs dot (mmvq.cu's `get_vec_dot_q_cuda` entry) returns vecdotq.cuh's
vec_dot_iq4_xs_q8_1 one ulp above (its float's bits plus one): the mat-vec outputs of an IQ4_XS model move by
about that much per partial dot. The wrapper lives in mmvq.cu, not vecdotq.cuh, because every mmq and
flash-attention instance includes vecdotq.cuh (a rebuild of most of ggml-cuda) while only mmvq.cu launches
this dot (mmq converts iq4_xs tiles to int8 and uses its own dots): one file rebuilds. Only batches of at most
8 columns take mul_mat_vec_q, so llama-perplexity sees the change with `-ub 8` or less, not with mmq's
batches.

The copy is made fresh (OUT is replaced). Exit 1, naming the file, when the text to change is not there
(another llama.cpp version): the plant is then not made, rather than made silently wrong.
"""
from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

MMVQ = "ggml/src/ggml-cuda/mmvq.cu"
WRAPPER = """// strata-bench planted slowdown (scripts/engine_plant.py slow-mmvq): every 10th call launches again.
template <typename... Args>
static void mul_mat_vec_q_switch_type(Args... args) {
    static int strata_calls = 0;
    mul_mat_vec_q_switch_type_impl(args...);
    if (++strata_calls % 10 == 0) {
        mul_mat_vec_q_switch_type_impl(args...);
    }
}

"""
ULP_DOT = """// strata-bench planted one ulp (scripts/engine_plant.py ulp-iq4_xs): iq4_xs dot, its float bits plus one.
static __device__ __forceinline__ float strata_vec_dot_iq4_xs_q8_1_ulp(
    const void * __restrict__ vbq, const block_q8_1 * __restrict__ bq8_1, const int & kbx, const int & iqs) {
    return __uint_as_float(__float_as_uint(vec_dot_iq4_xs_q8_1(vbq, bq8_1, kbx, iqs)) + 1u);
}

"""


def slow_mmvq(text: str) -> str:
    renamed, n_def = re.subn(r"^static void mul_mat_vec_q_switch_type\(", "static void mul_mat_vec_q_switch_type_impl(",
                             text, count=1, flags=re.MULTILINE)
    planted, n_entry = re.subn(r"^(void ggml_cuda_mul_mat_vec_q\()", WRAPPER.replace("\\", "\\\\") + r"\1", renamed,
                               count=1, flags=re.MULTILINE)
    if n_def != 1 or n_entry != 1:
        raise LookupError(f"{MMVQ}: no 'static void mul_mat_vec_q_switch_type(' and 'void ggml_cuda_mul_mat_vec_q(' "
                          f"at a line start")
    return planted


def ulp_iq4_xs(text: str) -> str:
    planted, n_case = re.subn(r"(case GGML_TYPE_IQ4_XS:\s*return )vec_dot_iq4_xs_q8_1;",
                              r"\1strata_vec_dot_iq4_xs_q8_1_ulp;", text)
    planted, n_table = re.subn(r"^(static constexpr __device__ vec_dot_q_cuda_t get_vec_dot_q_cuda\()",
                               ULP_DOT.replace("\\", "\\\\") + r"\1", planted, count=1, flags=re.MULTILINE)
    if n_case != 1 or n_table != 1:
        raise LookupError(f"{MMVQ}: no 'case GGML_TYPE_IQ4_XS: return vec_dot_iq4_xs_q8_1;' inside "
                          f"'static constexpr __device__ vec_dot_q_cuda_t get_vec_dot_q_cuda(' at a line start")
    return planted


PLANTS = {"slow-mmvq": (MMVQ, slow_mmvq), "ulp-iq4_xs": (MMVQ, ulp_iq4_xs)}


def _not_sources(tree: Path):
    """copytree's ignore: .git anywhere, and the tree's own build folders (build, build-cuda, ...) at its top
    only: cmake/build-info.cmake and common/build-info.cpp.in are sources the configure step reads."""
    def ignore(folder: str, names: list[str]) -> set[str]:
        top = Path(folder) == tree
        return {n for n in names if n == ".git" or (top and n.startswith("build") and (tree / n).is_dir())}
    return ignore


def plant(kind: str, tree: Path, out: Path) -> Path:
    """Copy `tree` to `out` (replaced) with the plant `kind` made; LookupError where its text is missing."""
    rel, change = PLANTS[kind]
    changed = change((tree / rel).read_text())
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(tree, out, symlinks=True, ignore=_not_sources(tree))
    (out / rel).write_text(changed)
    return out / rel


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in PLANTS:
        print(f"usage: engine_plant.py {{{','.join(PLANTS)}}} TREE OUT", file=sys.stderr)
        return 2
    try:
        path = plant(argv[0], Path(argv[1]), Path(argv[2]))
    except (LookupError, OSError) as exc:
        print(f"plant {argv[0]} not made: {exc}", file=sys.stderr)
        return 1
    print(f"planted {argv[0]}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
