"""Markdown table: this project's mmvq (new) at the DRAM shape against llama.cpp's figures on the same card.

    python scripts/peer_table.py results/nvidia-h200/bench-<stamp>.json [docs/peer_llamacpp_h200.csv]
"""
from __future__ import annotations

import sys

import pandas as pd

from strata_bench.results.store import read_records


def main(bench: str, peer: str = "docs/peer_llamacpp_h200.csv") -> None:
    rows = [r for r in read_records(bench) if r["family"] == "mmvq" and r["status"] == "timed"]
    ours = pd.DataFrame(rows)
    new = ours[ours.variant == "new"].set_index(["format", "ncols"])
    old = ours[ours.variant == "old"].set_index(["format", "ncols"])
    peer_df = pd.read_csv(peer).set_index(["format", "ncols"])
    table = pd.DataFrame({
        "old us": old["median_us"], "new us": new["median_us"], "new GB/s": new["gbps"],
        "new % read ceiling": 100 * new["frac_read"], "llama.cpp us": peer_df["us"],
    }).dropna(subset=["new us"])
    table["vs llama.cpp"] = table["llama.cpp us"] / table["new us"]
    print(table.sort_index().to_markdown(floatfmt=".2f"))


if __name__ == "__main__":
    main(*sys.argv[1:])
