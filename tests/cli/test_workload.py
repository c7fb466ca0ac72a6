"""`strata-bench workload` output lines (what an A/B reads) and its --tokens list, without a GPU."""
from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from strata_bench.ab.metrics import parse_output_specs, read_metrics, read_same
from strata_bench.cli.main import cli
from strata_bench.cli.workload import output_lines, parse_sizes
from strata_bench.errors import InputError


def _run(tokens, prefill_ms, logits):
    return {"tokens": tokens, "prefill_ms": prefill_ms, "decode_tokens": 32, "decode_ms": 64.0, "decode_tps": 500.0,
            "layers": 4, "format": "iq2_xxs", "variants": {"mmvq": "new", "grouped": "new"},
            "logits_sha256": logits, "decode_sha256": "d" * 64}


def test_lines_per_prompt_size_and_what_the_seed_style_ab_reads():
    lines = output_lines([_run(128, 1.5, "a" * 64), _run(512, 5.25, "b" * 64)])
    assert lines == ["kernels: mmvq=new grouped=new; weights iq2_xxs; 4 layers",
                     "prefill 128 tokens in 1.500 ms", "prefill 512 tokens in 5.250 ms",
                     f"logits sha256 128: {'a' * 64}", f"logits sha256 512: {'b' * 64}",
                     "decode 32 tokens in 64.000 ms: 500.0 tokens/s", f"decode sha256: {'d' * 64}"]
    text = "\n".join(lines)
    metrics = parse_output_specs([r"prefill=prefill (?P<key>\d+) tokens in (?P<value>[0-9.]+) ms",
                                  r"decode:higher=([0-9.]+) tokens/s"], "--metric", "metric")
    assert read_metrics(metrics, text) == {"prefill[128]": 1.5, "prefill[512]": 5.25, "decode": 500.0}
    same = parse_output_specs([r"logits=logits sha256 (?P<key>\d+): (?P<value>\w+)", r"tokens=decode sha256: (\w+)"],
                              "--same", "output", need_group=False)
    assert read_same(same, text) == {"logits[128]": "a" * 64, "logits[512]": "b" * 64, "tokens": "d" * 64}


def test_token_sizes():
    assert parse_sizes("512") == [512] and parse_sizes("128,512") == [128, 512]
    with pytest.raises(InputError, match=re.escape("got '0' in '128,0'")):
        parse_sizes("128,0")


def test_bad_tokens_exit_2_before_looking_for_a_gpu():
    res = CliRunner().invoke(cli, ["workload", "--tokens", "12x"])
    assert res.exit_code == 2 and "--tokens must be positive whole numbers" in res.output
