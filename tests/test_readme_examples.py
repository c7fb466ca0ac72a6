"""The README's example command lines, run on the CPU as a reader would type them (read from README.md, so a
changed README is what gets tested).

Examples are the `strata-bench` lines of its fenced bash blocks (the command an `ab` line runs after `--`
too) and the inline `strata-bench ...` spans outside tables. Here no GPU is usable, whatever the host: a
command the README says needs one exits 77, and lists its cases with `--list` (exit 0); every other
command exits 0. A synopsis (a table row, a FILE or PATH placeholder, `[optional]` parts, `a/b`
subcommands) cannot run: its command and every option it names must exist."""
from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli
from strata_bench.kernels.sources import REPO_ROOT
from strata_bench.gpu import devices

README = REPO_ROOT / "README.md"
ENGINE = str(Path(__file__).resolve().parent / "fake_engine.py")  # prints what `strata-bench workload` prints
# What a fenced example's placeholders stand for here; an unknown one fails the test, naming it.
PLACEHOLDERS = {"model.gguf": str(REPO_ROOT / "tests" / "data" / "gguf" / "other-rows.gguf")}
NEEDS_GPU = {"parity", "bench", "workload", "env"}  # exit 77 without a GPU (README: Exit codes)
TAKES_LIST = {"parity", "bench"}
_PLACEHOLDER = re.compile(r"(^|/)[A-Z]{3,}(/|\.|$)|^[A-Z]:[A-Z]$")  # FILE, PATH/TO/..., FILE.toml, A:B


def _strata_lines(text: str) -> list[str]:
    """`strata-bench ...` command lines of a code block: continuations joined, `a && b` split, comments cut."""
    out = []
    for line in re.sub(r"\\\n\s*", " ", text).splitlines():
        for part in line.split(" && "):
            part = part.split("  #")[0].strip()
            if part.startswith("strata-bench "):
                out.append(part)
    return out


def readme_examples() -> tuple[list[str], list[str]]:
    """(examples to run, synopses to check) as the README writes them."""
    text = README.read_text(encoding="utf-8")
    fenced = [line for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M)
              for line in _strata_lines(block)]
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    inline, synopses = [], []
    for line in prose.splitlines():
        for span in re.findall(r"`(strata-bench [^`]+)`", line):
            is_synopsis = line.startswith("|") or "[" in span or "/" in shlex.split(span)[1] or any(
                _PLACEHOLDER.search(word) for word in shlex.split(span))
            (synopses if is_synopsis else inline).append(span)
    return list(dict.fromkeys(fenced + inline)), list(dict.fromkeys(synopses))


EXAMPLES, SYNOPSES = readme_examples()


def test_the_readme_has_examples_of_each_kind():
    assert len(EXAMPLES) >= 8 and len(SYNOPSES) >= 5, (EXAMPLES, SYNOPSES)
    assert {shlex.split(e)[1] for e in EXAMPLES} >= {"parity", "bench", "ab", "fixtures", "results"}


def _words(line: str, optional: bool) -> list[str]:
    """The line's words after `strata-bench`, with its `[optional]` parts (unquoted words from `[...` to
    `...]`) kept, brackets removed, or left out."""
    words, inside = [], False
    for word in shlex.split(line)[1:]:
        opens, closes = word.startswith("[") and not inside, word.endswith("]") and (inside or word.startswith("["))
        if opens or inside:
            inside = not closes
            if optional:
                words.append(word.removeprefix("[") if opens else word)
                words[-1] = words[-1].removesuffix("]") if closes else words[-1]
            continue
        words.append(word)
    return words


def _argv(example: str) -> list[str]:
    """The example's arguments after `strata-bench`, without its optional parts, its placeholders
    replaced by what stands for them."""
    argv = _words(example, optional=False)
    argv = [PLACEHOLDERS.get(a, a) for a in argv]
    unknown = [a for a in argv if a.endswith(".gguf") and not Path(a).is_absolute() or _PLACEHOLDER.search(a)]
    assert not unknown, f"{example}: add what {unknown} stands for to PLACEHOLDERS"
    return argv


@pytest.fixture
def here(tmp_path, monkeypatch, family_registry):
    """A working folder with the repository's examples/, experiments/ and docs/ (the paths examples name), where what a
    command writes (results/, fixtures/) stays; no usable GPU; provenance without the slow parts."""
    import strata_bench.cli.ab as ab_cmd

    for name in ("examples", "experiments", "docs"):
        (tmp_path / name).symlink_to(REPO_ROOT / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("STRATA_FIXTURES", raising=False)
    monkeypatch.setattr(devices, "probe", lambda: devices.GpuProbe(False, 0, "cudaErrorNoDevice (test)"))
    monkeypatch.setattr(ab_cmd, "_provenance", lambda: {"devices": []})
    return tmp_path


def _invoke(argv: list[str]):
    return CliRunner().invoke(cli, argv)


def _inner_commands(argv: list[str]) -> list[list[str]]:
    """The command an `ab` of commands runs after `--`, once per value of each --param (substituted)."""
    inner = argv[argv.index("--") + 1:]
    params = [argv[i + 1].split("=", 1) for i, a in enumerate(argv[:argv.index("--")]) if a == "--param"]
    runs = [inner]
    for name, values in params:
        runs = [[a.replace(f"{{{name}}}", v) for a in run] for run in runs for v in values.split(",")]
    return runs


@pytest.mark.parametrize("example", EXAMPLES, ids=[" ".join(e.split()[1:4]) for e in EXAMPLES])
def test_readme_example_runs_on_the_cpu(example, here, monkeypatch):
    argv = _argv(example)
    command = argv[0]
    if command == "ab" and "--" in argv:
        # The command it runs, as the README writes it (the workload: 77 here), then the A/B itself over an
        # engine that prints what the workload prints (no GPU needed): the README's metrics, --same and --param.
        split = argv.index("--")
        assert argv[split + 1:split + 3] == ["strata-bench", "workload"], argv[split + 1:]
        for inner in _inner_commands(argv):
            result = _invoke(inner[1:])
            assert result.exit_code == 77, (inner, result.output)
        engine = [sys.executable, ENGINE, "run"] + argv[split + 3:]  # `strata-bench workload` -> the fake engine
        # one pair per --param value, not the README's 8 plus a warm-up: its 36 runs take 13 s on 2 cores
        result = _invoke([*argv[:split], "-q", "--pairs", "1", "--warmup", "0", "--", *engine])
        assert result.exit_code == 0, result.output
        return
    if command == "results":
        # Committed results are current only until a kernel source changes and the GPU suite runs again:
        # 0, or 1 naming results of other kernel sources (any other problem fails here).
        monkeypatch.chdir(REPO_ROOT)  # the repository's own results/ (read only)
        result = _invoke(argv)
        assert result.exit_code == 0 or (result.exit_code == 1 and " not current " in result.stderr
                                         and "failure" not in result.stderr), result.output
        return
    expected = 77 if command in NEEDS_GPU else 0
    result = _invoke(argv)
    assert result.exit_code == expected, (example, result.output)
    if expected == 77:
        assert "skipped: no usable CUDA GPU (cudaErrorNoDevice (test))" in result.stderr, result.stderr
    if command in TAKES_LIST:
        listed = _invoke([*argv, "--list"])
        assert listed.exit_code == 0, (example, listed.output)
        assert listed.stdout.strip(), example


def _command(path: list[str]) -> click.Command:
    cmd: click.Command = cli
    for name in path:
        assert isinstance(cmd, click.Group) and name in cmd.commands, f"no command {' '.join(path)}"
        cmd = cmd.commands[name]
    return cmd


@pytest.mark.parametrize("synopsis", SYNOPSES)
def test_readme_synopsis_names_real_commands_and_options(synopsis):
    words = _words(synopsis, optional=True)
    path = [w for w in words[:2] if not w.startswith("-") and not _PLACEHOLDER.search(w)]
    if len(path) == 2 and not isinstance(_command(path[:1]), click.Group):
        path = path[:1]  # an argument, not a subcommand
    for alternative in path[-1].split("/"):  # fixtures make/from-gguf/list: each must exist
        cmd = _command([*path[:-1], alternative])
    options = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
    named = {w for w in words if w.startswith("-")}
    assert named <= options, f"{synopsis}: {sorted(named - options)} not options of {' '.join(path)}"


def test_every_command_has_help_with_an_example():
    """README: "Every command has `--help` with an example"."""
    def walk(cmd, path):
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                yield from walk(sub, [*path, name])
        else:
            yield path

    for path in walk(cli, []):
        result = _invoke([*path, "--help"])
        assert result.exit_code == 0, path
        assert re.search(r"^\s*Examples?:", result.stdout, re.M), f"strata-bench {' '.join(path)} --help has no example"
