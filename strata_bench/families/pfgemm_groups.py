"""pfgemm's token groups: how many token rows each expert owns in a case, and the tiles they make. Shared
by the family (pfgemm.py) and its launch ABI (pfgemm_abi.py), so neither imports the other's module."""
from __future__ import annotations

import numpy as np

from strata_bench.kit import Case, InputError, ceil_div

FAMILY = "pfgemm"
# Uneven groups: empty experts, groups of 1, 15, 16 and 17 rows (around one 16-row fragment), 33 and 64
# (around the 32- and 64-row token tiles), and a trailing small group.
GROUPS_A = "0,1,15,16,17,33,64,4"


def group_sizes_of(spec: str) -> np.ndarray:
    """Token rows per expert from "a,b,c" or "GxE" (E experts of G rows each)."""
    try:
        if "x" in spec:
            rows, experts = (int(v) for v in spec.split("x"))
            sizes = np.full(experts, rows, dtype=np.int64)
        else:
            sizes = np.array([int(v) for v in spec.split(",")], dtype=np.int64)
    except ValueError:
        raise InputError(f"pfgemm: bad groups {spec!r}: expected 'a,b,c' or 'GxE'") from None
    if sizes.size == 0 or (sizes < 0).any():
        raise InputError(f"pfgemm: bad groups {spec!r}: need at least one expert and no negative size")
    return sizes


def group_sizes(case: Case) -> np.ndarray:
    """Token rows per expert of a case (its `groups` param)."""
    return group_sizes_of(str(case.param("groups", GROUPS_A)))


def token_tiles(sizes: np.ndarray, tile_rows: int) -> int:
    """Blocks along y: each expert's group in tiles of `tile_rows` token rows."""
    return int(sum(ceil_div(int(s), tile_rows) for s in sizes))
