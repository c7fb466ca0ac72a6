"""Instruction counts of a kernel's loops from its SASS (`cuobjdump --dump-sass` text), by issue pipe.

The n = 1 mmvq kernels were tuned by reading these counts (docs/PERF_NOTES.md v4, v5): per loop, how many
instructions reach the integer-ALU pipe, IMAD and IDP (the FMA-heavy side), FP32, shared and global memory.
A loop is the range from a backward branch's target to the branch; a count can be divided by the number of
units the loop handles (`per`: e.g. its IDP count / 8 = the chunks of a plain decoder's one-column loop).
The opcode -> pipe table is this project's approximation for sm_90 (integer logic, shifts, byte permutes,
adds and compares on the integer-ALU pipe; IMAD and IDP on the FMA-heavy side); opcodes not listed count as
other. It is for comparing two builds of one kernel, not for absolute throughput.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from strata_bench.errors import InputError

PIPES: dict[str, frozenset[str]] = {
    "alu": frozenset({"LOP3", "LOP", "SHF", "PRMT", "IADD3", "POPC", "LEA", "ISETP", "SEL", "FLO", "BMSK",
                      "SGXT", "IMNMX", "VIADD", "VIADDMNMX", "VIMNMX", "IABS", "BREV", "PLOP3", "FSEL", "FSETP"}),
    "imad": frozenset({"IMAD", "IMUL", "IMADSP"}),
    "idp": frozenset({"IDP", "IDP4A"}),
    "fp32": frozenset({"FFMA", "FMUL", "FADD", "FMNMX"}),
    "lds": frozenset({"LDS", "LDSM"}),
    "ldg": frozenset({"LDG", "LD"}),
    "st": frozenset({"STG", "STS", "ST"}),
}
_INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[0-9T]+\s+)?([A-Z][A-Z0-9_]*)(?:\.[A-Z0-9_.]+)?\s*([^;]*);")
_FUNCTION = re.compile(r"^\s*Function : (\S+)\s*$", re.M)


@dataclass(frozen=True)
class Instr:
    address: int
    opcode: str  # without modifiers: LOP3, IMAD, LDG ...
    operands: str


@dataclass(frozen=True)
class Loop:
    start: int
    end: int  # the backward branch's address
    opcodes: tuple[str, ...]

    @property
    def counts(self) -> Counter:
        return Counter(self.opcodes)

    def by_pipe(self) -> dict[str, int]:
        """Instructions per pipe, plus other and total."""
        counts = self.counts
        out = {pipe: sum(counts[op] for op in ops) for pipe, ops in PIPES.items()}
        out["other"] = len(self.opcodes) - sum(out.values())
        out["total"] = len(self.opcodes)
        return out


def parse_functions(sass: str) -> dict[str, list[Instr]]:
    """Mangled kernel name -> its instructions in address order."""
    heads = list(_FUNCTION.finditer(sass))
    out = {}
    for i, head in enumerate(heads):
        body = sass[head.end():heads[i + 1].start() if i + 1 < len(heads) else len(sass)]
        out[head.group(1)] = [Instr(int(m.group(1), 16), m.group(2), m.group(3).strip())
                              for m in _INSTR.finditer(body)]
    return out


def loops(instrs: list[Instr]) -> list[Loop]:
    """Every range from a backward branch's target to the branch, innermost (shortest) first."""
    found = []
    for ins in instrs:
        target = re.search(r"0x([0-9a-f]+)", ins.operands) if ins.opcode == "BRA" else None
        if target and int(target.group(1), 16) < ins.address:
            start = int(target.group(1), 16)
            body = tuple(i.opcode for i in instrs if start <= i.address <= ins.address)
            found.append(Loop(start, ins.address, body))
    return sorted(found, key=lambda lp: (len(lp.opcodes), lp.start))


def units(loop: Loop, per: str) -> float:
    """The number of units a loop handles, from `per` = OPCODE:N (its OPCODE count / N), or 1 for ""."""
    if not per:
        return 1.0
    opcode, _, n = per.partition(":")
    try:
        divisor = float(n)
    except ValueError:
        raise InputError(f"--per {per!r}: expected OPCODE:N, e.g. IDP:8") from None
    count = loop.counts[opcode.upper()]
    return count / divisor if count else 0.0


def dump_sass(cubin: bytes, cuobjdump: str | None = None) -> str:
    """`cuobjdump --dump-sass` of a cubin (cuobjdump from $CUOBJDUMP or PATH)."""
    tool = cuobjdump or os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    if not tool:
        raise InputError("cuobjdump not found: put the CUDA toolkit's bin on PATH or set CUOBJDUMP "
                         "(pip install nvidia-cuda-cuobjdump ships one)")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernels.cubin"
        path.write_bytes(cubin)
        proc = subprocess.run([tool, "--dump-sass", str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        why = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
        raise InputError(f"cuobjdump failed: {why}")
    return proc.stdout
