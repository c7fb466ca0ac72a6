"""The engine A/B forms of issue 36 end to end on the CPU, against a fake llama.cpp (tests/engine/llama-fake.py):
llama-bench's JSON as keyed metrics, token identity through a fresh llama-server per run and
`engine complete`, logit identity and KL divergence through llama-perplexity, and the bad input refused
before anything runs. Every run is a real process; the differences are planted by the fake's switches."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from strata_bench.cli.main import cli

PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]
FAKE = str(ROOT / "tests" / "engine" / "llama-fake.py")


@pytest.fixture(autouse=True)
def _fast_provenance(monkeypatch):
    import strata_bench.cli.ab as ab_cmd

    monkeypatch.setattr(ab_cmd, "_provenance", lambda: {"devices": []})
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # `python -m strata_bench` in a run imports this checkout


@pytest.fixture
def model(tmp_path) -> str:
    path = tmp_path / "gemma-3-270m.gguf"
    path.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(64))
    return str(path)


def _ab(tmp_path, *args):
    return CliRunner().invoke(cli, ["ab", "--results", str(tmp_path / "res"), "-q", "--warmup", "0", *args])


def _bench(model):
    return ["--", PY, FAKE, "bench", "-m", model, "-p", "64,512", "-n", "32", "-r", "2", "-o", "json"]


def _verdicts(res):
    case = json.loads(res.stdout)["cases"][0]
    return {m["name"]: (m["verdict"], m["unit"], m["higher_is_better"]) for m in case["metrics"]}


def test_speed_aa_is_same_on_every_llama_bench_test(tmp_path, model, monkeypatch):
    monkeypatch.setenv("FAKE_NOISE_PCT", "0.05")
    res = _ab(tmp_path, "--pairs", "8", "--metric-json", "llama-bench", "-o", "json", *_bench(model))
    assert res.exit_code == 0, res.output
    assert _verdicts(res) == {"avg_ts[pp64]": ("SAME", "t/s", True), "avg_ts[pp512]": ("SAME", "t/s", True),
                              "avg_ts[tg32]": ("SAME", "t/s", True)}


def test_a_planted_generation_slowdown_is_slower_on_tg_only(tmp_path, model, monkeypatch):
    monkeypatch.setenv("FAKE_NOISE_PCT", "0.05")
    res = _ab(tmp_path, "--pairs", "8", "--env-b", "FAKE_TG_SLOWER_PCT=3", "--metric-json", "llama-bench", "-o", "md",
              *_bench(model))
    assert res.exit_code == 0, res.output
    rows = {r.split("|")[1].strip(): r.split("|")[-2].strip() for r in res.stdout.splitlines()
            if r.startswith("| avg_ts")}
    assert rows == {"avg_ts[pp64] (t/s, higher)": "SAME", "avg_ts[pp512] (t/s, higher)": "SAME",
                    "avg_ts[tg32] (t/s, higher)": "SLOWER"}


def _server_args(port: int, model: str, *extra):
    client = f"{PY} -m strata_bench engine complete --port {port} --prompt 'The capital of France' -n 16 --seed 1"
    return ["--pairs", "2", "--server", f"{PY} {FAKE} server -m {model} --port {port}", "--ready-port", str(port),
            "--metric", r"gen:higher:t/s=generation: \d+ tokens, ([0-9.]+) t/s",
            "--same", r"tokens=tokens sha256: (\w+)", *extra, "-o", "json", "--a", client, "--b", client]


def test_token_identity_through_a_fresh_server_per_run(tmp_path, model):
    port = _free_port()
    same = _ab(tmp_path, *_server_args(port, model))
    assert same.exit_code == 0, same.output
    identity = json.loads(same.stdout)["cases"][0]["identity"]
    assert [(i["name"], i["same"], len(i["A"])) for i in identity] == [("tokens", True, 64)]
    differ = _ab(tmp_path, *_server_args(port, model, "--env-b", "FAKE_ULP=1"))
    assert differ.exit_code == 1
    row = json.loads(differ.stdout)["cases"][0]["identity"][0]
    assert (row["name"], row["same"]) == ("tokens", False) and row["A"] != row["B"]
    assert "\ncommand: output 'tokens' differs: run 0 (A, pair 0) printed" in differ.stderr


def _logit_args(tmp_path, model, *extra):
    """A's logits are the base (--setup); each run writes its own logits (their sha256) and scores its
    KL divergence and top-1 agreement against the base."""
    text, base, own = tmp_path / "text.txt", tmp_path / "base.kld", tmp_path / "own.kld"
    text.write_text("some text\n")
    ppl = f"{PY} {FAKE} perplexity -m {model} -f {text}"
    run = (f"{ppl} --kl-divergence-base {own} > /dev/null && sha256sum {own} && "
           f"{ppl} --kl-divergence-base {base} --kl-divergence")
    return ["--pairs", "2", "--shell", "--setup", f"{ppl} --kl-divergence-base {base}",
            "--same", r"logits=^([0-9a-f]{64})  ", "--same", r"kld=Mean\s+KLD:\s+(\S+)",
            "--same", r"top1=Same top p:\s+(\S+)", *extra, "-o", "json", "--", run]


def test_logit_identity_and_kl_divergence_against_a_base(tmp_path, model):
    same = _ab(tmp_path, *_logit_args(tmp_path, model))
    assert same.exit_code == 0, same.output
    rows = {i["name"]: (i["A"], i["B"], i["same"]) for i in json.loads(same.stdout)["cases"][0]["identity"]}
    assert rows["kld"] == ("0.000000", "0.000000", True) and rows["top1"] == ("100.000", "100.000", True)
    assert rows["logits"][2] and len(rows["logits"][0]) == 64
    ulp = _ab(tmp_path, *_logit_args(tmp_path, model, "--env-b", "FAKE_ULP=1"))
    assert ulp.exit_code == 1
    rows = {i["name"]: (i["A"], i["B"], i["same"]) for i in json.loads(ulp.stdout)["cases"][0]["identity"]}
    assert rows["kld"] == ("0.000000", "0.000412", False) and rows["top1"] == ("100.000", "99.216", False)
    assert not rows["logits"][2]


def test_env_switch_within_one_build(tmp_path, model, monkeypatch):
    monkeypatch.setenv("FAKE_NOISE_PCT", "0.05")
    res = _ab(tmp_path, "--pairs", "6", "--env-a", "GGML_CUDA_DISABLE_FUSION=1", "--env-b", "GGML_CUDA_DISABLE_FUSION=0",
              "--metric-json", "llama-bench", "-o", "json", *_bench(model))
    assert res.exit_code == 0, res.output
    arms = json.loads(res.stdout)["cases"][0]["arms"]
    assert (arms["A"]["env"], arms["B"]["env"]) == ({"GGML_CUDA_DISABLE_FUSION": "1"}, {"GGML_CUDA_DISABLE_FUSION": "0"})


@pytest.mark.parametrize("args, message", [
    (["--metric-json", "llama-bench", "--a", "llama-bench -m {m} -p 512", "--b", "llama-bench -m {m} -p 512"],
     "--metric-json llama-bench: llama-bench prints no JSON without -o json (or -o jsonl); the command is "
     "'llama-bench -m {m} -p 512'"),
    (["--metric-json", "avg_tps@llama-bench", "--", "llama-bench", "-m", "{m}", "-o", "json"],
     "--metric-json: llama-bench never prints a figure 'avg_tps' (its figures: avg_ts, stddev_ts, avg_ns, stddev_ns, samples_ts, samples_ns): "
     "'avg_tps@llama-bench'"),
    (["--metric-json", "llama-bench", "--", "llama-bench", "-m", "{bad}", "-o", "json"],
     "model is not a GGUF file (it starts b'PK\\x03\\x04', not b'GGUF'): {bad}"),
    (["--server", "llama-server -m {bad} --port 8093", "--ready-port", "8093", "--", "true"],
     "model is not a GGUF file (it starts b'PK\\x03\\x04', not b'GGUF'): {bad}"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, model, args, message):
    bad = tmp_path / "model.safetensors"
    bad.write_bytes(b"PK\x03\x04 not a gguf")
    res = _ab(tmp_path, *[a.replace("{m}", model).replace("{bad}", str(bad)) for a in args])
    assert (res.exit_code, res.output) == (2, message.replace("{m}", model).replace("{bad}", str(bad)) + "\n")
    assert not (tmp_path / "res").exists()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
