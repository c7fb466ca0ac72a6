"""The real-weights table of a parity report (report/sources.py): fixture, file, sha256 prefix, tensor, rows."""
from __future__ import annotations

from strata_bench.cases.fixtures import describe_source
from strata_bench.report.sources import sources_markdown


def test_sources_markdown():
    seeded = {"fixture": "mine", "file": None, "sha256": None, "tensor": None, "rows": None, "kind": "seed"}
    assert sources_markdown([describe_source("smollm2-ffn_down.q8_0"), seeded]) == "\n".join([
        "Real weights:", "", "| fixture | file | sha256 | tensor | rows |", "|---|---|---|---|---|",
        "| `smollm2-ffn_down.q8_0` | `smollm2-rows.gguf` | `2fe9f257ef3f` | `ffn_down.q8_0` | `0:64` |",
        "| `mine` | - | - | - | - |"])
    assert sources_markdown([]) == ""
