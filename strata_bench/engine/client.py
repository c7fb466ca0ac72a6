"""One request to a running llama-server, as `engine complete` sends it.

llama-server binds its port before it loads the model and answers every request with HTTP 503 ("Loading
model") until the model is on the GPU: a port that accepts connections (ab's --ready-port) is not yet a
server that completes. So a 503 is waited out, polling, within the request's own time limit; any other
error ends the request at once.
"""
from __future__ import annotations

import time
import urllib.error
import urllib.request

LOADING = 503  # llama-server's status while the model loads
POLL_S = 0.1


class ServerError(Exception):
    """No answer from the server: the URL and why, in one line."""


def post_json(url: str, body: bytes, timeout: float) -> bytes:
    """POST body to url and return the answer's bytes, waiting out 503s until timeout seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
        left = deadline - time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=max(left, 0.001)) as answer:
                return answer.read()
        except urllib.error.HTTPError as exc:
            if exc.code != LOADING or time.monotonic() + POLL_S >= deadline:
                waited = "" if exc.code != LOADING else f" (still loading after {timeout:g} s)"
                raise ServerError(f"no answer from {url}: {exc}{waited}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise ServerError(f"no answer from {url}: {exc}") from None
        time.sleep(POLL_S)
