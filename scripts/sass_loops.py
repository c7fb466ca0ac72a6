"""Per kernel of a built-in family, its loops' instruction counts by issue pipe, from the SASS of the
project's own NVRTC build (strata_bench/kernels/sass.py; cuobjdump must be on PATH or in $CUOBJDUMP).

    PYTHONPATH=$PWD python scripts/sass_loops.py --family mmvq --kernel 'mmvq_new<siq::fmt_iq2_xxs.*, 1,' --per IDP:8
    PYTHONPATH=$PWD python scripts/sass_loops.py --family mmvq --kernel 'sign_masked' --per IDP:16 --arch 90
    PYTHONPATH=$PWD python scripts/sass_loops.py --cases experiments/mmvq_onecol/cases.py --family mmvq_onecol \
        --kernel 'mmvq_onecol<' --per IDP:8

--kernel is a regular expression over the family's name expressions (the kernels its variants launch); --cases
adds the families of a --cases file (an experiment's), compiled from their own kernels folder;
--per OPCODE:N divides every count by the loop's OPCODE count / N (IDP:8 is chunks for a plain decoder's
one-column loop, IDP:16 for a sign-mask decoder's). Prints a markdown table, one row per loop with at
least one such unit, innermost first. Exit 2 on bad input or a missing tool.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))

COLUMNS = ("alu", "imad", "idp", "fp32", "lds", "ldg", "st", "other", "total")


def _families(cases: str) -> dict:
    """The built-in families, and those a --cases file adds."""
    from strata_bench.cases.registry import load_user_cases
    from strata_bench.families import load_builtin_families

    families = dict(load_builtin_families())
    if cases:
        load_user_cases(cases, into=families)
    return families


def rows(family: str, pattern: str, arch: str, per: str, cases: str = "") -> list[str]:
    from strata_bench.errors import InputError
    from strata_bench.kernels.build import compile_source
    from strata_bench.kernels.sass import dump_sass, loops, parse_functions, units

    families = _families(cases)
    if family not in families:
        kind = "family" if cases else "built-in family"
        raise InputError(f"no {kind} {family!r}; families: {', '.join(sorted(families))}")
    fam = families[family]
    out = []
    for source in fam.sources:
        exprs = [e for e in fam.name_expressions(source) if re.search(pattern, e)]
        if not exprs:
            continue
        compiled = compile_source(source, exprs, arch, root=fam.kernels_root)
        functions = parse_functions(dump_sass(compiled.cubin))
        for expr in exprs:
            for loop in loops(functions.get(compiled.lowered[expr], [])):
                n = units(loop, per)
                if n == 0:
                    continue
                counts = loop.by_pipe()
                cells = " | ".join(f"{counts[c] / n:.1f}" for c in COLUMNS)
                out.append(f"| {expr} | {loop.start:#x}-{loop.end:#x} | {n:g} | {cells} |")
    if not out:
        raise InputError(f"no loop of a {family} kernel matching {pattern!r}" + (f" has {per}" if per else ""))
    return out


def main(argv: list[str] | None = None) -> int:
    from strata_bench.errors import InputError

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", required=True)
    parser.add_argument("--kernel", default=".", help="regular expression over the name expressions")
    parser.add_argument("--arch", default="90")
    parser.add_argument("--per", default="", help="OPCODE:N, e.g. IDP:8")
    parser.add_argument("--cases", default="", help="a --cases file whose families to add (an experiment's)")
    args = parser.parse_args(argv)
    try:
        table = rows(args.family, args.kernel, f"sm_{args.arch.removeprefix('sm_')}", args.per, args.cases)
    except InputError as exc:
        print(f"sass_loops: {exc}", file=sys.stderr)
        return 2
    unit = f"a unit (the loop's {args.per.split(':')[0]} count / {args.per.split(':')[-1]})" if args.per else "a loop"
    print(f"Instructions per {unit}, by pipe ({args.family}, sm_{args.arch.removeprefix('sm_')}, NVRTC build):\n")
    print(f"| kernel | loop | units | {' | '.join(COLUMNS)} |")
    print("|" + "---|" * (3 + len(COLUMNS)))
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
