"""The promotion's proof: grouped's `new` kernels (this tree's kernels_src/grouped/grouped.cu) are the machine code
experiments/grouped_sched timed, and `old`'s did not move. Compiles, under the loaded NVRTC for sm_90 (cache off):
- `new`'s name expressions here, and the same instances of grouped_sched_{gateup,down} from REV's
  grouped_sched.cu in the experiment's kernels folder at REV, with REV's kernels_src ($STRATA_KERNELS_SRC, in a child);
- `old`'s name expressions here and at REV;
each side as one program of the same kernels, so the symbol tables line up. Prints, per kernel, whether its .text
is byte for byte the other's and whether every section of the kernel is (scripts/cubin_digests.py's
kernel_digest: .text with its flags and register field, .nv.info, .nv.shared, .nv.constant0). Exits 1 if any
differs.

    PYTHONPATH=$PWD python experiments/grouped_sched/compare_text.py ee97e83  # the last commit with the experiment
    PYTHONPATH=/tmp/nvrtc130:$PWD python experiments/grouped_sched/compare_text.py ee97e83  # NVRTC 13.0.88
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "scripts")]
from cubin_digests import elf_sections, kernel_digest  # noqa: E402

SOURCE = "grouped/grouped.cu"


def _build(exprs: list[str], source: str, root: str | None) -> tuple[bytes, dict[str, str]]:
    from strata_bench.kernels.build import compile_source

    built = compile_source(source, exprs, "sm_90", use_cache=False, root=Path(root) if root else None)
    return built.cubin, built.lowered


def _at_rev(rev: str, jobs: list[tuple[list[str], str, str | None]]) -> list[tuple[bytes, dict[str, str]]]:
    """_build(*job) for each job in a child whose kernels_src is REV's (exported with REV's experiment)."""
    tree = Path(tempfile.mkdtemp(prefix="gsched-"))
    subprocess.run(f"git -C {REPO} archive {rev} kernels_src experiments/grouped_sched | tar -x -C {tree}",
                   shell=True, check=True)
    jobs = [(e, s, str(tree / r) if r else None) for e, s, r in jobs]
    code = ("import pickle, sys; sys.path[:0] = [sys.argv[1], sys.argv[1] + '/experiments/grouped_sched']; "
            "from compare_text import _build; jobs = pickle.loads(sys.stdin.buffer.read()); "
            "pickle.dump([_build(*j) for j in jobs], sys.stdout.buffer)")
    env = {**os.environ, "STRATA_KERNELS_SRC": str(tree / "kernels_src")}
    out = subprocess.run([sys.executable, "-c", code, str(REPO)], input=pickle.dumps(jobs), env=env,
                         capture_output=True, check=True)
    return pickle.loads(out.stdout)


def _compare(label: str, expr: str, mine: tuple, theirs: tuple, their_expr: str) -> bool:
    (cub_a, low_a), (cub_b, low_b) = mine, theirs
    sec_a, sec_b = elf_sections(cub_a), elf_sections(cub_b)
    text_a = next(d for n, _, _, d in sec_a if n == ".text." + low_a[expr])
    text_b = next(d for n, _, _, d in sec_b if n == ".text." + low_b[their_expr])
    same_text = text_a == text_b
    same_all = kernel_digest(sec_a, low_a[expr]) == kernel_digest(sec_b, low_b[their_expr])
    print(f"{label} {expr}: .text {len(text_a) - 16} B {'same' if same_text else 'DIFFERS'}; "
          f"every section {'same' if same_all else 'DIFFERS'}")
    return same_text and same_all


def main(rev: str) -> int:
    from strata_bench.families import load_builtin_families
    from strata_bench.kernels.build import nvrtc_version

    fam = load_builtin_families()["grouped"]
    new, old = (fam.variant(v).kernels(fam, SOURCE) for v in ("new", "old"))
    timed = [e.replace("grouped_gateup_new", "grouped_sched_gateup").replace("grouped_down_new", "grouped_sched_down")
             for e in new]
    mine_new, mine_old = _build(new, SOURCE, None), _build(old, SOURCE, None)
    exp_new, rev_old = _at_rev(rev, [(timed, "grouped_sched.cu", "experiments/grouped_sched/kernels"),
                                     (old, SOURCE, None)])
    print(f"NVRTC {'.'.join(map(str, nvrtc_version()))}, sm_90: this tree against {rev}")
    ok = [_compare("new", e, mine_new, exp_new, t) for e, t in zip(new, timed)]
    ok += [_compare("old", e, mine_old, rev_old, e) for e in old]
    print(f"{len(ok) - sum(ok)} of {len(ok)} kernels differ")
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
