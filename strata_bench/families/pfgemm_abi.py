"""pfgemm's launch ABI for TOML variants (docs/ABI.md, "pfgemm"): kept beside pfgemm.py, which would
otherwise pass 400 lines; PfGemm.launch_abi imports it, and it imports only the groups module."""
from __future__ import annotations

import numpy as np

from strata_bench.families.pfgemm_groups import FAMILY, group_sizes, token_tiles
from strata_bench.kernels.constants import PFGEMM_FORMAT_IDS as FORMAT_IDS
from strata_bench.kernels.constants import PFGEMM_NEW_TILE_ROWS as NEW_TILE_ROWS
from strata_bench.kernels.constants import PFGEMM_OLD_TILE_ROWS as OLD_TILE_ROWS
from strata_bench.kit import AbiArg, Case, LaunchAbi


def _abi_fields(case: Case) -> dict[str, int]:
    from strata_bench.formats import get_format

    sizes = group_sizes(case)
    return {"rows": case.rows, "cols": case.cols, "tokens": case.ncols, "experts": int(sizes.size),
            "row_bytes": get_format(case.fmt).bytes_per_row(case.cols),
            f"tiles_{OLD_TILE_ROWS}": token_tiles(sizes, OLD_TILE_ROWS),
            f"tiles_{NEW_TILE_ROWS}": token_tiles(sizes, NEW_TILE_ROWS)}


PFGEMM_ABI = LaunchAbi(
    family=FAMILY,
    args=(
        AbiArg("x", "const __half*", "[tokens][cols] fp16 activations, rows sorted by expert, contiguous (row "
                                     "stride cols halves)", lambda c, d, o: d["x"]),
        AbiArg("w", "const unsigned char*", "[experts][rows] weight rows of row_bytes bytes, contiguous, no padding "
                                            "(expert e's rows start at e * rows * row_bytes); no readable bytes "
                                            "after the last row", lambda c, d, o: d["w"]),
        AbiArg("offsets", "const int*", "[experts + 1] token row offsets: expert e owns rows offsets[e] .. "
                                        "offsets[e+1] - 1", lambda c, d, o: d["offsets"]),
        AbiArg("y", "float*", "[tokens][rows] float32, every element written", lambda c, d, o: o["y"]),
        AbiArg("rows", "int", "weight rows per expert (N)", lambda c, d, o: np.int32(c.rows)),
        AbiArg("cols", "int", "values per weight row and activation row (K)", lambda c, d, o: np.int32(c.cols)),
        AbiArg("experts", "int", "experts (entries of offsets, less one)", lambda c, d, o: np.int32(d["experts"])),
    ),
    field_names=("rows", "cols", "tokens", "experts", "row_bytes", f"tiles_{OLD_TILE_ROWS}", f"tiles_{NEW_TILE_ROWS}"),
    fields=_abi_fields,
    placeholder_sets=tuple({"fmt_id": str(i), "fmt": f} for f, i in FORMAT_IDS.items()),
    placeholders=lambda case: {"fmt_id": str(FORMAT_IDS[case.fmt]), "fmt": case.fmt},
    baseline="old",
    writes="y: all tokens x rows floats, within the float64 tolerance and with the same max |err| as old "
           "(tensor-core sums: not compared bit for bit)",
)
