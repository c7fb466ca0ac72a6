"""`strata-bench report FILE`: render any stored results file."""
from __future__ import annotations

from pathlib import Path

import click

from strata_bench.errors import InputError

from strata_bench.cli.options import output_option
from strata_bench.files import UserPath


@click.command("report")
@click.argument("path", metavar="FILE", type=UserPath(dir_okay=False))
@output_option(("table", "md", "csv", "json"), "Terminal table, markdown, CSV or JSON.")
@click.option("--peer", "peer_csv", type=UserPath(dir_okay=False), default=None, metavar="VARIANT|CSV",
              help="Set an mmvq bench file against a peer's figures: a VARIANT of the file (another engine's "
                   "kernel timed in the same run), or a CSV (format, ncols, us[, rows, cols]): "
                   "per format and column count each variant's us and GB/s, the best's share of the read "
                   "ceiling, the peer's us, peer/best and the issue-14 target, met or missed.")
def command(path, output, peer_csv):
    """Render a results file (summary .json or records .jsonl) of any kind: parity, bench, ab.

    Columns are picked by the file's kind; a kind without a view shows every scalar column.
    A/B files are re-judged from their run records (same statistics and verdict as `ab`); their
    CSV is one row per run.

    \b
    Examples:
        strata-bench report results/nvidia-h200/ab-20250101T120000Z.json
        strata-bench report results/nvidia-h200/bench-20250101T120000Z.jsonl -o md
        strata-bench report results/nvidia-h200/parity-20250101T120000Z.json -o csv > parity.csv
        strata-bench report --peer ggml results/nvidia-h200/bench-20250101T120000Z.json -o md   # of bench --ggml
        strata-bench report --peer docs/peer_llamacpp_h200.csv results/nvidia-h200/bench-20250101T120000Z.json -o md
    """
    if peer_csv is not None:
        from strata_bench.results.load import load
        from strata_bench.report.peer import (foreign_variants, load_peer, own_records, peer_in_records, peer_rows,
                                              render_peer)

        loaded = load(path)
        if loaded.kind != "bench":
            raise InputError(f"--peer needs a bench results file; {loaded.path.name} is a {loaded.kind} file")
        records = list(loaded.records)
        foreign = foreign_variants((loaded.summary or {}).get("provenance") or {})
        is_file = Path(peer_csv).exists()
        named = peer_csv in foreign or (not is_file and any(r.get("variant") == peer_csv for r in records))
        if not named and not is_file:
            variants = sorted({str(r.get("variant")) for r in records if r.get("variant")})
            raise InputError(f"--peer {peer_csv}: neither a variant of {loaded.path.name} "
                             f"({', '.join(variants) or 'none'}) nor a peer CSV file")
        peer = peer_in_records(records, peer_csv) if named else load_peer(peer_csv)
        rows = peer_rows(own_records(records, foreign | ({peer_csv} if named else set())), peer)
        click.echo(render_peer(rows, output), nl=False if output == "csv" else True)
        return
    from strata_bench.report.render import render_file

    text = render_file(path, output)
    if text is not None:
        click.echo(text, nl=not text.endswith("\n"))
