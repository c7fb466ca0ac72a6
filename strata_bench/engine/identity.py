"""Token and logit identity of an engine's runs, read from what llama.cpp prints.

- Tokens: llama-server's `/completion` with `return_tokens: true` answers the generated token ids
  (`tokens`) beside the text (`content`) and `timings` (prompt_n, prompt_per_second, predicted_n,
  predicted_per_second). A greedy request (temperature 0, top_k 1, a fixed seed, no prompt cache) gives
  the same ids on every run of a deterministic build; their sha256 is taken over the ids written as
  decimal numbers joined by commas (`echo -n 2,651,9 | sha256sum` reproduces it by hand).
- Logits: `llama-perplexity --kl-divergence-base FILE` writes the base's log-probabilities to FILE (its
  sha256 is the logits' identity); with `--kl-divergence` too, it reads FILE and prints the KL divergence
  of this build against it. Its summary (`Mean    KLD:`, `Same top p:`) is printed only over 100 or more
  scored tokens; below that, the last chunk's row (running means) is all there is, and is read instead.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from strata_bench.errors import InputError

_NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf)"
_SUMMARY_KLD = re.compile(rf"^Mean\s+KLD:\s+{_NUM}\s+±\s+{_NUM}", re.MULTILINE)
_SUMMARY_TOP = re.compile(rf"^Same top p:\s+{_NUM}\s+±\s+{_NUM}\s*%", re.MULTILINE)
_SUMMARY_PPL = re.compile(rf"^Mean PPL\(Q\)\s+:\s+{_NUM}", re.MULTILINE)
# chunk, PPL ± u, ln(PPL(Q)/PPL(base)) ± u, KLD ± u, Δp RMS ± u %, Same top p ± u %
_CHUNK_ROW = re.compile(rf"^\s*(\d+)\s+{_NUM}\s+±\s+{_NUM}\s+{_NUM}\s+±\s+{_NUM}\s+{_NUM}\s+±\s+{_NUM}\s+"
                        rf"{_NUM}\s+±\s+{_NUM}\s*%\s+{_NUM}\s+±\s+{_NUM}\s*%", re.MULTILINE)


@dataclass(frozen=True)
class KlDivergence:
    """llama-perplexity --kl-divergence's result: mean KLD, top-1 agreement in percent, where read from."""

    mean_kld: float
    kld_uncertainty: float
    same_top_pct: float
    same_top_uncertainty: float
    ppl: float | None
    source: str  # "summary" or "chunk N" (fewer than 100 scored tokens: no summary)


def parse_kl_divergence(text: str) -> KlDivergence | None:
    """The KL divergence statistics in llama-perplexity's output, or None where it printed none."""
    kld, top = _SUMMARY_KLD.search(text), _SUMMARY_TOP.search(text)
    if kld and top:
        ppl = _SUMMARY_PPL.search(text)
        return KlDivergence(float(kld.group(1)), float(kld.group(2)), float(top.group(1)), float(top.group(2)),
                            float(ppl.group(1)) if ppl else None, "summary")
    rows = list(_CHUNK_ROW.finditer(text))
    if not rows:
        return None
    g = rows[-1].groups()
    return KlDivergence(float(g[5]), float(g[6]), float(g[9]), float(g[10]), float(g[1]), f"chunk {g[0]}")


def file_sha256(path: str | Path) -> str:
    """sha256 of a file (a logits file of a few hundred MB: read in blocks)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def tokens_sha256(ids: Sequence[int]) -> str:
    """sha256 of token ids written as decimals joined by commas."""
    return hashlib.sha256(",".join(str(int(i)) for i in ids).encode()).hexdigest()


def completion_request(prompt: str, n_predict: int, seed: int) -> dict[str, Any]:
    """A greedy /completion request that returns the token ids."""
    return {"prompt": prompt, "n_predict": n_predict, "temperature": 0, "top_k": 1, "seed": seed,
            "cache_prompt": False, "return_tokens": True, "stream": False}


@dataclass(frozen=True)
class Completion:
    """What one /completion answered: the ids, the text, and the server's own timings."""

    tokens: tuple[int, ...]
    text: str
    prompt_n: int | None
    prompt_per_second: float | None
    predicted_n: int | None
    predicted_per_second: float | None

    def lines(self) -> list[str]:
        """The lines `engine complete` prints, for `ab --metric`/`--same` regexes."""
        out = []
        if self.prompt_per_second is not None:
            out.append(f"prompt: {self.prompt_n} tokens, {self.prompt_per_second:.3f} t/s")
        if self.predicted_per_second is not None:
            out.append(f"generation: {self.predicted_n} tokens, {self.predicted_per_second:.3f} t/s")
        out.append(f"tokens: {len(self.tokens)}")
        out.append(f"tokens sha256: {tokens_sha256(self.tokens)}")
        out.append(f"text sha256: {hashlib.sha256(self.text.encode()).hexdigest()}")
        return out


def parse_completion(body: str | bytes | Mapping[str, Any]) -> Completion:
    """A /completion answer -> Completion; InputError when it is not one or carries no token ids."""
    if not isinstance(body, Mapping):
        try:
            body = json.loads(body)
        except ValueError:
            raise InputError(f"the server's answer is not JSON: {str(body)[:120]!r}") from None
    if not isinstance(body, Mapping) or "content" not in body:
        raise InputError(f"the server's answer has no 'content': {json.dumps(body)[:120]}")
    tokens = body.get("tokens")
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens) or (
            not tokens and body.get("content")):
        raise InputError("the server answered no token ids ('tokens'): a llama-server without return_tokens?")
    timings = body.get("timings") if isinstance(body.get("timings"), Mapping) else {}
    return Completion(tuple(tokens), str(body["content"]), timings.get("prompt_n"), timings.get("prompt_per_second"),
                      timings.get("predicted_n"), timings.get("predicted_per_second"))
