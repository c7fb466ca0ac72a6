"""Token and logit identity: llama-server /completion answers, llama-perplexity's KL divergence output
(summary and, under 100 scored tokens, the last chunk row), and the digests."""
from __future__ import annotations

import hashlib
import json

import pytest

from strata_bench.engine.identity import (completion_request, file_sha256, parse_completion, parse_kl_divergence,
                                          tokens_sha256)
from strata_bench.errors import InputError

# NOT MEASURED: written by hand in llama-perplexity's --kl-divergence layout (tools/perplexity/perplexity.cpp).
KLD_SUMMARY = """kl_divergence: 0.41 seconds per pass - ETA 0.02 minutes

chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p
   1      20.1187 ±    1.4551       0.00143 ±    0.00187       0.00038 ±    0.00004     0.812 ±  0.104 %    99.206 ±  0.559 %
   2      21.3346 ±    1.1215       0.00097 ±    0.00121       0.00041 ±    0.00003     0.845 ±  0.081 %    99.206 ±  0.395 %

====== Perplexity statistics ======
Mean PPL(Q)                   :  21.334602 ±   1.121535
Mean PPL(base)                :  21.313924 ±   1.120291
Cor(ln(PPL(Q)), ln(PPL(base))):  99.99%

====== KL divergence statistics ======
Mean    KLD:   0.000412 ±   0.000031
Maximum KLD:   0.016480
Median  KLD:   0.000201

====== Token probability statistics ======
Mean    Δp:  0.012 ± 0.051 %
RMS Δp    :  0.845 ± 0.081 %
Same top p: 99.206 ± 0.395 %
"""
CHUNKS_ONLY = KLD_SUMMARY.split("\n====== Perplexity")[0]
AA_ROW = ("chunk PPL ln KL Δp Same\n   1      21.4100 ±    0.5000       0.00000 ±       -nan      -0.00000 ±    "
          "0.00000     0.000 ±  0.000 %    100.000 ±  0.000 %\n")


def test_kl_divergence_from_the_summary_or_else_the_last_chunk():
    got = parse_kl_divergence(KLD_SUMMARY)
    assert (got.mean_kld, got.kld_uncertainty, got.same_top_pct, got.same_top_uncertainty, got.ppl, got.source) == (
        0.000412, 0.000031, 99.206, 0.395, 21.334602, "summary")
    chunk = parse_kl_divergence(CHUNKS_ONLY)
    assert (chunk.mean_kld, chunk.same_top_pct, chunk.ppl, chunk.source) == (0.00041, 99.206, 21.3346, "chunk 2")
    same = parse_kl_divergence(AA_ROW)
    assert (same.mean_kld, same.same_top_pct, same.source) == (0.0, 100.0, "chunk 1")
    assert parse_kl_divergence("Final estimate: PPL = 21.4031 +/- 0.53377\n") is None


def test_digests_of_token_ids_and_files(tmp_path):
    assert tokens_sha256([2, 651, 9]) == hashlib.sha256(b"2,651,9").hexdigest()
    logits = tmp_path / "base.kld"
    logits.write_bytes(b"_logits_" + bytes(range(256)))
    assert file_sha256(logits) == hashlib.sha256(b"_logits_" + bytes(range(256))).hexdigest()


def test_a_greedy_request_and_its_answer():
    assert completion_request("Hello", 32, 7) == {
        "prompt": "Hello", "n_predict": 32, "temperature": 0, "top_k": 1, "seed": 7, "cache_prompt": False,
        "return_tokens": True, "stream": False}
    answer = {"content": " world", "tokens": [1917, 235265], "stop": True,
              "timings": {"prompt_n": 2, "prompt_ms": 1.1, "prompt_per_second": 1818.2, "predicted_n": 2,
                          "predicted_ms": 4.0, "predicted_per_second": 500.0}}
    done = parse_completion(json.dumps(answer))
    assert done.tokens == (1917, 235265) and done.lines() == [
        "prompt: 2 tokens, 1818.200 t/s", "generation: 2 tokens, 500.000 t/s", "tokens: 2",
        f"tokens sha256: {hashlib.sha256(b'1917,235265').hexdigest()}",
        f"text sha256: {hashlib.sha256(b' world').hexdigest()}"]


@pytest.mark.parametrize("body, message", [
    ("<html>busy</html>", "the server's answer is not JSON: '<html>busy</html>'"),
    ('{"error": {"code": 500}}', 'the server\'s answer has no \'content\': {"error": {"code": 500}}'),
    ('{"content": "text", "tokens": []}', "the server answered no token ids ('tokens'): a llama-server without "
                                         "return_tokens?"),
])
def test_answers_without_token_ids_are_input_errors(body, message):
    with pytest.raises(InputError) as exc:
        parse_completion(body)
    assert str(exc.value) == message
