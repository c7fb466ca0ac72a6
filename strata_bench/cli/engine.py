"""`strata-bench engine`: build llama.cpp's CUDA backend from a tree (cached by content), and the greedy
/completion client whose printed token-id sha256 `ab --same` compares run by run."""
from __future__ import annotations

import json

import click

from strata_bench.cli.options import SAID, output_option, quiet_option
from strata_bench.errors import InputError
from strata_bench.files import UserPath


@click.group("engine")
def command() -> None:
    """Build an engine from a tree, and read its identity, for whole-engine A/B runs (`ab --order abba`).

    \b
    Example:
        strata-bench engine build ~/src/llama.cpp --arch 90 --dry-run
    """


@command.command("build")
@click.argument("tree", type=UserPath(file_okay=False))
@click.option("--arch", default=None, type=SAID, metavar="SM[,SM]",
              help="CUDA architectures (CMAKE_CUDA_ARCHITECTURES), e.g. 90 (default: the local GPU's, else 90).")
@click.option("-j", "--jobs", type=click.IntRange(1, 512), default=None, help="Parallel build jobs (default: CPUs).")
@click.option("--dry-run", is_flag=True, help="Print the plan (targets, key, CMake command lines); build nothing.")
@output_option(("table", "json"), "table: the bin folder on stdout, a summary on stderr; json: the record.")
@quiet_option
def build(tree: str, arch: str | None, jobs: int | None, dry_run: bool, output: str, quiet: bool) -> None:
    """Build llama.cpp's CUDA engine from TREE, only what an A/B runs, cached by TREE's content.

    CMake + nvcc, Release, GGML_CUDA=ON, only the asked architectures, ninja where it is installed,
    and only the targets llama-bench, llama-completion (or llama-cli), llama-perplexity, llama-quantize,
    llama-imatrix and llama-server. The executables and their libraries land in
    $STRATA_CACHE_DIR/engines/<key>/bin (default ~/.cache/strata-bench/engines), keyed by the sha256
    of every build file of TREE, the options and the tools' versions: the same content builds once.
    Every tree is built in one workspace per option set, so a second tree that differs in one file
    rebuilds only what that file touches. stdout is the bin folder: A=$(strata-bench engine build A).

    Exit codes: 0 built (or cached); 1 the build failed (its first compiler error and file, and the
    log's path); 2 TREE is not a llama.cpp tree, cmake or nvcc is missing, or nvcc's toolkit
    has no cuBLAS.

    \b
    Example:
        strata-bench engine build ~/src/llama.cpp --arch 90 --dry-run
        A=$(strata-bench engine build ~/src/llama.cpp) && B=$(strata-bench engine build ~/src/llama.cpp-b)
    """
    from strata_bench.engine.build import run_build
    from strata_bench.engine.plan import make_plan
    from strata_bench.engine.tree import file_digests, open_tree

    found = open_tree(tree)
    digests = file_digests(found.root)
    plan = make_plan(found, arch, jobs=jobs, digests=digests)
    if dry_run:
        body = plan.describe()
        click.echo(json.dumps(body, indent=1) if output == "json" else "\n".join(
            f"{k}: {' '.join(v) if isinstance(v, list) else v}" for k, v in body.items()))
        return
    with _progress(quiet, f"building {', '.join(plan.targets)} (sm {plan.arch})") as advance:
        record = run_build(plan, advance, digests)
    if output == "json":
        click.echo(json.dumps(record.to_json(), indent=1))
        return
    how = ("cached" if record.cached else
           f"configured in {record.configure_s:.1f} s, built in {record.build_s:.1f} s, {record.steps} build steps, "
           f"{record.files_copied} tree files copied")
    click.echo(f"engine {record.key} ({how}): {record.bin}", err=True)
    click.echo(record.bin)


def _progress(quiet: bool, label: str):
    """advance(done, total, line) over the report's one progress bar (the total known from the first line)."""
    import contextlib

    @contextlib.contextmanager
    def bar():
        if quiet:
            yield None
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(stderr=True)
        if not console.is_terminal:
            yield None
            return
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=True) as progress:
            task = progress.add_task(label, total=None)

            def advance(done: int, total: int, line: str) -> None:
                progress.update(task, completed=done, total=total or None)

            yield advance

    return bar()


@command.command("pack")
@click.argument("tree", type=UserPath(file_okay=False))
@click.argument("out", type=UserPath(dir_okay=False))
def pack(tree: str, out: str) -> None:
    """Pack the files a build of TREE reads into the gzip tarball OUT, to carry to an offline GPU host.

    The same files `engine build` hashes (no .git, docs, models, tests or old build folders): about
    11 MB for a 2026 llama.cpp. Unpack with `mkdir T && tar xzf OUT -C T`, then `engine build T`.

    \b
    Example:
        strata-bench engine pack ~/src/llama.cpp /tmp/llama-src.tgz
    """
    from pathlib import Path

    from strata_bench.engine.tree import open_tree, pack as pack_tree

    found = open_tree(tree)
    if not Path(out).parent.is_dir():
        raise InputError(f"cannot write {out}: {Path(out).parent} is not a folder")
    files, size = pack_tree(found.root, Path(out))
    click.echo(f"{out}: {files} files, {size / 1e6:.1f} MB")


@command.command("complete")
@click.option("--port", type=click.IntRange(1, 65535), required=True, help="The llama-server's port.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--prompt", default=None, help="The prompt text.")
@click.option("--prompt-file", type=UserPath(dir_okay=False, exists=True), default=None,
              help="Read the prompt from this file.")
@click.option("-n", "--n-predict", type=click.IntRange(1, 1 << 20), default=64, show_default=True,
              help="Tokens to generate.")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--timeout", type=float, default=600.0, show_default=True,
              help="Seconds to wait for the answer, a model still loading (HTTP 503) included.")
def complete(port: int, host: str, prompt: str | None, prompt_file: str | None, n_predict: int, seed: int,
             timeout: float) -> None:
    """One greedy /completion from a running llama-server; print its token ids' sha256 and timings.

    The request: temperature 0, top_k 1, the seed, no prompt cache, return_tokens. Printed:
    `prompt: N tokens, X t/s`, `generation: N tokens, X t/s`, `tokens: N`, `tokens sha256: HEX`
    (of the ids as decimals joined by commas) and `text sha256: HEX`, for ab's --metric and --same.
    llama-server answers 503 while its model loads, after its port already listens: that is waited out.

    \b
    Example:
        strata-bench ab --pairs 4 --a 'strata-bench engine complete --port 8091 --prompt Hello -n 32' \\
            --b 'strata-bench engine complete --port 8091 --prompt Hello -n 32' --server 'llama-server \\
            -m model.gguf --port 8091' --ready-port 8091 --same 'tokens=tokens sha256: (\\w+)'
    """
    from strata_bench.engine.client import ServerError, post_json
    from strata_bench.engine.identity import completion_request, parse_completion

    if (prompt is None) == (prompt_file is None):
        raise InputError("give exactly one of --prompt TEXT and --prompt-file FILE")
    if prompt_file is not None:
        with open(prompt_file, encoding="utf-8") as f:
            prompt = f.read()
    body = json.dumps(completion_request(prompt or "", n_predict, seed)).encode()
    try:
        raw = post_json(f"http://{host}:{port}/completion", body, timeout)
    except ServerError as exc:
        raise click.ClickException(str(exc)) from None
    for line in parse_completion(raw).lines():
        click.echo(line)
